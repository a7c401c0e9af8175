#include "vgpu/measure_barrier.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "base/errors.h"

namespace ringbench::vgpu {

MeasureBarrier::MeasureBarrier(int vms) : vms_(std::max(vms, 1)) {}

int MeasureBarrier::count(State s) const {
  return static_cast<int>(std::count_if(state_.begin(), state_.end(), [s](const auto& kv) { return kv.second == s; }));
}

bool MeasureBarrier::all_arrived() const {
  return count(State::waiting) + count(State::measuring) + count(State::finished) >= vms_;
}

void MeasureBarrier::arrive(int vm, std::chrono::milliseconds timeout) {
  std::unique_lock lock(m_);
  state_[vm] = State::waiting;
  if (all_arrived()) {
    released_ = true;
    cv_.notify_all();
  }
  const bool released = cv_.wait_for(lock, timeout, [&] { return released_ || stopped_ || count(State::left) > 0; });
  if (!released_) {
    const int arrived = count(State::waiting);
    state_[vm] = State::left;  // a VM that gave up waiting will not measure either
    cv_.notify_all();
    if (stopped_) throw Error("the scheduler shut down while VM " + std::to_string(vm) +
                                           " waited for the other VMs to start measuring");
    if (!released)
      throw Error("VM " + std::to_string(vm) + ": only " + std::to_string(arrived) + " of " +
                               std::to_string(vms_) + " VMs reached their measured steps within " +
                               std::to_string(timeout.count()) + " ms");
    throw Error("VM " + std::to_string(vm) +
                             ": another VM powered off before its measured steps, so the VMs cannot measure together");
  }
  for (auto& [id, s] : state_)
    if (s == State::waiting) s = State::measuring;
}

int MeasureBarrier::finish(int vm) {
  std::lock_guard lock(m_);
  state_[vm] = State::finished;
  return count(State::measuring) + count(State::waiting);
}

void MeasureBarrier::leave(int vm) {
  std::lock_guard lock(m_);
  state_[vm] = State::left;
  cv_.notify_all();
}

void MeasureBarrier::shutdown() {
  std::lock_guard lock(m_);
  stopped_ = true;
  cv_.notify_all();
}

}  // namespace ringbench::vgpu
