// SliceScheduler: the policies of slice_policy.h behind one mutex and condition variable, on
// the steady clock. Waiters sleep until a release, a VM powering on or off, their deadline, or
// (equal and fixed share) the start of their own next slot. The recorded intervals are the
// policy's allocation; a gate's usage() is what the job itself got.
#include "vgpu/scheduler.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "base/errors.h"
#include "base/name_table.h"
#include "vgpu/sliced_gate.h"

namespace ringbench::vgpu {

namespace {
constexpr EnumName<Policy> kPolicyNames[] = {
    {Policy::best_effort, "best_effort"}, {Policy::equal_share, "equal_share"}, {Policy::fixed_share, "fixed_share"}};
}  // namespace

const char* policy_name(Policy p) { return name_of(kPolicyNames, p, "unknown"); }

Policy parse_policy(const std::string& s) {
  if (const auto p = parse_name(kPolicyNames, s)) return *p;
  throw std::invalid_argument("unknown vGPU scheduling policy '" + s +
                              "' (expected best_effort, equal_share or fixed_share)");
}

struct SliceScheduler::State {
  explicit State(SchedulerOptions o)
      : policy(o, Clock::now()), power_gen(static_cast<size_t>(o.max_instances), 0) {}

  mutable std::mutex m;
  std::condition_variable cv;
  SlicePolicy policy;               // guarded by m
  std::vector<uint64_t> power_gen;  // per VM id: bumped by every power_off
  bool stopped = false;
};

SliceScheduler::SliceScheduler(SchedulerOptions o) : s_(std::make_unique<State>(o)) {}

SliceScheduler::~SliceScheduler() = default;

const SchedulerOptions& SliceScheduler::options() const { return s_->policy.options(); }

Clock::time_point SliceScheduler::epoch() const { return s_->policy.epoch(); }

int SliceScheduler::power_on() {
  State& st = *s_;
  std::lock_guard lock(st.m);
  const int vm = st.policy.power_on(Clock::now());
  st.cv.notify_all();  // equal_share: the slots' owners changed
  return vm;
}

void SliceScheduler::power_off(int vm) {
  State& st = *s_;
  std::lock_guard lock(st.m);
  st.policy.check_vm(vm, "power_off");
  if (!st.policy.is_on(vm)) return;
  ++st.power_gen[vm];
  st.policy.power_off(vm, Clock::now(), !st.stopped);
  st.cv.notify_all();
}

Clock::time_point SliceScheduler::acquire(int vm, std::chrono::milliseconds timeout) {
  State& st = *s_;
  SlicePolicy& p = st.policy;
  const auto deadline = Clock::now() + timeout;
  std::unique_lock lock(st.m);
  p.check_vm(vm, "acquire");
  if (!p.is_on(vm)) {
    throw std::logic_error("vGPU scheduler: acquire of VM " + std::to_string(vm) +
                           ", which is not powered on");
  }
  if (p.holder() == vm) return p.grant_end();
  const uint64_t gen = st.power_gen[vm];
  p.ask(vm, Clock::now());
  // Stops waiting (the next in line may now be at the front) and throws.
  auto give_up = [&](const std::string& why) {
    p.cancel(vm);
    st.cv.notify_all();
    throw Error("vGPU VM " + std::to_string(vm) + ": " + why);
  };
  for (;;) {
    if (p.holder() == vm) return p.grant_end();  // handed over by a release
    if (st.stopped) give_up("the scheduler is shutting down");
    if (st.power_gen[vm] != gen) give_up("powered off while waiting for a slice");
    const auto now = Clock::now();
    Clock::time_point retry;
    if (p.poll(vm, now, &retry)) return p.grant_end();
    if (now >= deadline) {
      give_up("timed out waiting for a slice after " + std::to_string(timeout.count()) + " ms (" +
              policy_name(p.options().policy) + ", " + std::to_string(p.options().max_instances) +
              " instances, " + std::to_string(p.options().slice.count()) + " us slices)");
    }
    st.cv.wait_until(lock, std::min(retry, deadline));
  }
}

void SliceScheduler::release(int vm) {
  State& st = *s_;
  std::lock_guard lock(st.m);
  st.policy.release(vm, Clock::now(), !st.stopped);
  st.cv.notify_all();
}

void SliceScheduler::shutdown() {
  State& st = *s_;
  std::lock_guard lock(st.m);
  st.stopped = true;
  st.cv.notify_all();
}

double SliceScheduler::busy_seconds(Clock::time_point from, Clock::time_point to) const {
  std::lock_guard lock(s_->m);
  return s_->policy.busy(-1, from, to, Clock::now());
}

double SliceScheduler::busy_seconds(int vm, Clock::time_point from, Clock::time_point to) const {
  std::lock_guard lock(s_->m);
  s_->policy.check_vm(vm, "busy_seconds");
  return s_->policy.busy(vm, from, to, Clock::now());
}

std::vector<BusyInterval> SliceScheduler::intervals() const {
  std::lock_guard lock(s_->m);
  return s_->policy.intervals();
}

namespace {

// The gate over an in-process scheduler: a slice is acquire(), giving it up release().
class LocalGate final : public SlicedGate {
 public:
  LocalGate(SliceScheduler& s, int vm, std::chrono::milliseconds timeout)
      : s_(s), vm_(vm), timeout_(timeout) {}
  ~LocalGate() override {
    if (inside_) s_.release(vm_);
  }

 private:
  Clock::time_point request() override { return s_.acquire(vm_, timeout_); }
  void give_back() override { s_.release(vm_); }

  SliceScheduler& s_;
  const int vm_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace

std::unique_ptr<models::DeviceGate> make_local_gate(SliceScheduler& s, int vm,
                                                    std::chrono::milliseconds timeout) {
  return std::make_unique<LocalGate>(s, vm, timeout);
}

}  // namespace ringbench::vgpu
