#include "runner/migrate/source_gate.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/errors.h"
#include "collectives/net.h"

namespace ringbench::migrate {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kAskEvery = std::chrono::seconds(1);
constexpr int kAcceptsPerWake = 64;  // then the connections in their handshake get their turn

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

// poll()'s wait until `wake`, rounded up, at most a second (so a far deadline never overflows).
int wait_ms(Clock::time_point wake) {
  const auto left = wake - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  if (left >= std::chrono::seconds(1)) return 1000;
  return int(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

}  // namespace

std::string SourceRefusals::summary() const {
  if (count == 0) return "";
  return "refused " + std::to_string(count) + " unauthenticated connection" + (count == 1 ? "" : "s") +
         " (the last: " + last + ")";
}

struct SourceGate::Pending {
  int fd = -1;
  std::string who;  // "a connection from ip:port"
  TargetHandshake handshake;
  Clock::time_point by;  // its window ends
  std::string in;        // what it sent of its hello, then of its MAC
  bool answered = false;  // its hello was answered: its MAC is due
};

SourceGate::SourceGate(int listen_fd, std::string secret, const StreamShape& expected, Millis timeout,
                       std::function<void(const std::string&)> on_refusal)
    : listen_fd_(listen_fd), secret_(std::move(secret)), expected_(expected),
      window_(std::min(timeout, kMaxHelloWindow)), on_refusal_(std::move(on_refusal)) {
  net::set_nonblocking(listen_fd_);  // accept() in a loop until none is left
}

SourceGate::~SourceGate() {
  for (Pending& p : pending_) net::close_fd(p.fd);
}

int SourceGate::accept(Clock::time_point deadline, const std::function<bool()>& keep_waiting) {
  const auto started = Clock::now();
  auto next_ask = started + kAskEvery;
  for (;;) {
    refuse_expired();
    const auto now = Clock::now();
    if (now >= deadline) {
      char waited[32];
      std::snprintf(waited, sizeof waited, "%.1f s", std::chrono::duration<double>(deadline - started).count());
      throw TimeoutError(-1, "no migration source that knows the job's secret connected within " + std::string(waited) +
                                 (refusals_.count ? "; " + refusals_.summary() : ""));
    }
    if (keep_waiting && now >= next_ask) {
      if (!keep_waiting()) return -1;
      next_ask = Clock::now() + kAskEvery;
    }
    // Out of descriptors, the listener rests a while instead of waking poll at once (as the store).
    const bool paused = now < accept_paused_until_;
    std::vector<pollfd> fds{{paused ? -1 : listen_fd_, POLLIN, 0}};
    auto wake = keep_waiting ? std::min(deadline, next_ask) : deadline;
    if (paused) wake = std::min(wake, accept_paused_until_);
    for (const Pending& p : pending_) {
      fds.push_back({p.fd, POLLIN, 0});
      wake = std::min(wake, p.by);
    }
    if (::poll(fds.data(), fds.size(), wait_ms(wake)) < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("the migration target cannot wait for its source: poll: ") + std::strerror(errno));
    }
    // Newest first: refusing one moves only those after it, already served.
    for (size_t i = pending_.size(); i-- > 0;) {
      if (fds[i + 1].revents == 0 || !serve(pending_[i])) continue;
      Pending source = std::move(pending_[i]);
      pending_.erase(pending_.begin() + std::ptrdiff_t(i));
      while (!pending_.empty()) refuse(0, pending_[0].who + " was still in its handshake when the source came");
      try {
        source.handshake.check_shape(expected_);
        net::set_socket_buffers(source.fd, kStreamSocketBufferBytes);
      } catch (...) {
        net::close_fd(source.fd);
        throw;
      }
      return source.fd;
    }
    if (fds[0].revents & POLLIN) admit_new();
  }
}

void SourceGate::admit_new() {
  for (int n = 0; n < kAcceptsPerWake; ++n) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || net::accept_connection_gone(errno)) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (net::accept_out_of_resources(errno)) {
        accept_paused_until_ = Clock::now() + net::kAcceptBackoff;
        return;
      }
      throw Error(std::string("the migration target cannot accept its source: accept: ") + std::strerror(errno));
    }
    const std::string who = "a connection from " + net::peer_address(fd);
    pending_.push_back({fd, who, TargetHandshake(who), Clock::now() + window_, {}, false});
    if (pending_.size() > kMaxPendingStrangers) {
      // The oldest that has not yet sent a valid hello goes first: a real source answers its
      // challenge within a round trip, so a burst of strangers cannot push it out mid-handshake.
      size_t drop = 0;
      while (drop + 1 < pending_.size() && pending_[drop].answered) ++drop;
      refuse(drop, pending_[drop].who + " was dropped for a newer one (at most " + std::to_string(kMaxPendingStrangers) +
                       " connections wait in their handshake at once)");
    }
  }
}

// Reads what the connection sent of its handshake (never past it: the source's stream follows),
// and answers its hello. A connection that fails is refused, and its index then belongs to the next.
bool SourceGate::serve(Pending& p) {
  const size_t want = p.answered ? TargetHandshake::kMacBytes : TargetHandshake::kHelloBytes;
  char buf[TargetHandshake::kHelloBytes];
  const ssize_t n = ::recv(p.fd, buf, want - p.in.size(), MSG_DONTWAIT);
  const size_t index = size_t(&p - pending_.data());
  if (n == 0) {
    refuse(index, p.who + " closed the connection in its handshake");
    return false;
  }
  if (n < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      refuse(index, p.who + " failed in its handshake: " + std::strerror(errno));
    return false;
  }
  p.in.append(buf, size_t(n));
  if (p.in.size() < want) return false;
  try {
    if (p.answered) {
      p.handshake.check_mac(p.in, secret_);
      return true;
    }
    const std::string reply = p.handshake.answer_hello(p.in, secret_);
    p.in.clear();
    p.answered = true;
    // A fresh connection's empty send buffer takes the whole reply, or the peer is not reading.
    if (::send(p.fd, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL) != ssize_t(reply.size()))
      throw Error(p.who + " does not take in the handshake's reply");
  } catch (const Error& e) {
    refuse(index, e.what());
  }
  return false;
}

void SourceGate::refuse(size_t i, const std::string& why) {
  net::close_fd(pending_[i].fd);
  pending_.erase(pending_.begin() + std::ptrdiff_t(i));
  ++refusals_.count;
  refusals_.last_ns = now_ns();
  refusals_.last = why;
  if (on_refusal_) on_refusal_(why);
}

void SourceGate::refuse_expired() {
  const auto now = Clock::now();
  for (size_t i = pending_.size(); i-- > 0;) {
    if (pending_[i].by > now) continue;
    refuse(i, pending_[i].who + " sent no " + (pending_[i].answered ? "MAC" : "hello") + " within " +
                  std::to_string(window_.count()) + " ms");
  }
}

}  // namespace ringbench::migrate
