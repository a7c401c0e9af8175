#include "runner/migrate/copier.h"

#include "collectives/net.h"
#include "runner/migrate/wire.h"

namespace ringbench::migrate {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

Copier::Copier(Framebuffer& fb, std::function<int()> connect, const CopyPolicy& policy,
               std::chrono::milliseconds timeout)
    : fb_(fb), policy_(policy), timeout_(timeout), buf_(Framebuffer::kChunkBytes) {
  thread_ = std::thread([this, connect = std::move(connect)] { run(connect); });
}

Copier::~Copier() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  net::close_fd(fd_);
}

Round Copier::send_round(int number, bool stunned, const std::function<void(uint64_t)>& progress) {
  Round r;
  r.round = number;
  r.stunned = stunned;
  const auto t0 = Clock::now();
  auto last_progress = t0;
  for (size_t c = 0; c < fb_.chunks(); ++c) {
    if (!stunned && stop_) break;  // the stun sends the rest
    // Stunned, nothing writes: the chunk goes from its place; else from a copy taken under the lock.
    const size_t n = stunned ? (fb_.dirty(c) ? fb_.chunk_bytes(c) : 0) : fb_.take_if_dirty(c, buf_.data());
    if (n == 0) continue;
    send_chunk(fd_, uint32_t(c), stunned ? fb_.chunk_data(c) : buf_.data(), n, timeout_);
    r.bytes += n;
    sent_ += n;
    if (progress && Clock::now() - last_progress > std::chrono::seconds(1)) {
      progress(sent_);
      last_progress = Clock::now();
    }
  }
  r.seconds = since(t0);
  r.dirty_after = fb_.dirty_bytes();
  return r;
}

bool Copier::converged(const Round& r, const Round* before) const {
  if (r.round >= policy_.max_rounds) return true;
  const double rate = r.seconds > 0 ? double(r.bytes) / r.seconds : 0;
  if (rate > 0 && double(r.dirty_after) / rate <= policy_.stun_target_s) return true;
  return before && double(r.bytes) > policy_.shrink * double(before->bytes);
}

void Copier::run(const std::function<int()>& connect) {
  try {
    fd_ = connect();
    for (int n = 1; policy_.precopy && !stop_; ++n) {
      const Round r = send_round(n, false, {});
      std::lock_guard<std::mutex> lock(mu_);
      rounds_.push_back(r);
      if (converged(r, rounds_.size() > 1 ? &rounds_[rounds_.size() - 2] : nullptr)) break;
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
  }
  ready_ = true;
}

void Copier::finish(const std::string& state, const std::function<void(uint64_t)>& progress) {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) std::rethrow_exception(error_);
  }
  const int number = int(rounds().size()) + 1;
  const Round r = send_round(number, true, progress);
  send_state(fd_, state, timeout_);
  send_done(fd_, timeout_);
  wait_stored(fd_, timeout_);
  std::lock_guard<std::mutex> lock(mu_);
  rounds_.push_back(r);
}

std::vector<Round> Copier::rounds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rounds_;
}

}  // namespace ringbench::migrate
