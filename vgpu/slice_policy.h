// NVIDIA vGPU's three time-slice policies as a state machine over explicit time: no threads,
// no waiting, no clock. SliceScheduler (scheduler.h) drives it with the steady clock under a
// mutex; tests drive it with simulated time, so each policy's accounting is checked exactly,
// however loaded the host is.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <vector>

namespace ringbench::vgpu {

enum class Policy { best_effort, equal_share, fixed_share };

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC: comparable across processes

struct SchedulerOptions {
  Policy policy = Policy::best_effort;
  int max_instances = 1;  // slots of fixed_share, and the most VMs that may power on
  std::chrono::microseconds slice{10000};
};

// One held interval of the device, for utilization over any window.
struct BusyInterval {
  int vm = -1;
  Clock::time_point begin, end;
};

class SlicePolicy {
 public:
  // Slot 0 of equal and fixed share starts at `epoch`. Throws std::invalid_argument on bad options.
  SlicePolicy(SchedulerOptions o, Clock::time_point epoch);
  const SchedulerOptions& options() const { return o_; }
  Clock::time_point epoch() const { return epoch_; }

  int power_on(Clock::time_point now);  // the lowest free id; throws when all are on
  // Cancels the VM's wait and ends its hold, handing the device on as release() does. Off
  // already: nothing.
  void power_off(int vm, Clock::time_point now, bool hand_over = true);
  bool is_on(int vm) const;

  // `vm` (on, not holding) starts waiting for the device at `now`.
  void ask(int vm, Clock::time_point now);
  // Whether `vm` holds the device at `now`, granting it if the policy lets it. If not,
  // `*retry` gets the earliest time the answer can change other than by a release or a VM
  // powering on or off (the start of its next slot), or time_point::max().
  bool poll(int vm, Clock::time_point now, Clock::time_point* retry);
  void cancel(int vm);  // stops waiting
  // Ends `vm`'s hold, if it holds the device, and hands the device straight to the VM the
  // policy picks, if that one waits (unless !hand_over: the scheduler is shutting down).
  void release(int vm, Clock::time_point now, bool hand_over = true);

  int holder() const { return holder_; }  // -1: free
  Clock::time_point grant_end() const { return grant_end_; }
  // Finished holds, in grant order; busy() also counts the one in progress up to `now`.
  const std::vector<BusyInterval>& intervals() const { return done_; }
  // Held time of `vm` (-1: every VM) within [from, to], in seconds.
  double busy(int vm, Clock::time_point from, Clock::time_point to, Clock::time_point now) const;
  void check_vm(int vm, const char* what) const;  // throws std::out_of_range

 private:
  bool fifo() const { return o_.policy == Policy::best_effort; }
  int64_t slot_of(Clock::time_point t) const;
  Clock::time_point slot_start(int64_t s) const { return epoch_ + s * o_.slice; }
  std::vector<int> vms_on() const;
  int64_t next_slot(int vm, int64_t s) const;
  int next_holder(Clock::time_point now, Clock::time_point* end) const;
  void grant(int vm, Clock::time_point begin, Clock::time_point end);
  void owners_changed(Clock::time_point now);
  void dequeue(int vm);

  SchedulerOptions o_;
  Clock::time_point epoch_;
  std::vector<char> on_;                  // per VM id: powered on
  int holder_ = -1;
  Clock::time_point held_since_, grant_end_;
  Clock::time_point free_since_;          // when the device was last released to no one
  std::deque<int> queue_;                 // best_effort: the waiting VMs, in arrival order
  std::vector<char> waiting_;             // equal and fixed share: per VM id, waiting
  std::vector<Clock::time_point> asked_;  // per VM id: when its pending wait began
  std::vector<BusyInterval> done_;
};

}  // namespace ringbench::vgpu
