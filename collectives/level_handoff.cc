#include "collectives/level_handoff.h"

#include "base/errors.h"

namespace ringbench {

void LevelHandoff::advance(Stage stage) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++done_[stage];
  }
  cv_.notify_all();
}

void LevelHandoff::wait_for(Stage stage, size_t chunks, const std::string& what) {
  std::unique_lock<std::mutex> lk(mu_);
  const bool ready = cv_.wait_for(lk, limit_, [&] { return first_ || done_[stage] >= chunks; });
  if (first_) throw Stopped{};
  if (ready) return;
  lk.unlock();
  const std::string why = what + ": not done within " + std::to_string(limit_.count()) + " ms";
  on_timeout_(why);
  throw TimeoutError(-1, why);
}

void LevelHandoff::run_guarded(const std::function<void()>& body) noexcept {
  try {
    body();
    return;
  } catch (const Stopped&) {
    return;  // the other thread failed first; its error is the one kept
  } catch (...) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!first_) first_ = std::current_exception();
  }
  cv_.notify_all();
}

void LevelHandoff::rethrow_first() {
  std::lock_guard<std::mutex> lk(mu_);
  if (first_) std::rethrow_exception(first_);
}

}  // namespace ringbench
