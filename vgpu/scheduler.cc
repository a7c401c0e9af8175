// SliceScheduler: NVIDIA vGPU's three time-slice policies under one mutex and condition variable.
//
// best_effort hands the device to the waiting VMs in arrival order, `slice` at a time: a VM
// that gives the device up at the end of its slice and asks again queues behind the others.
// equal_share and fixed_share cut time into slots of `slice` counted from the scheduler's
// construction; slot s belongs to the (s mod n)-th powered-on VM in id order (n VMs on), or to
// VM s mod max_instances, and only its owner may be granted during it, up to the slot's end. An
// owner without work leaves its slot idle. Nobody is preempted: a holder keeps the device until
// it releases (at its next checkpoint after the grant end), and if it overran into the next
// slot, that slot's owner gets what is left of it.
//
// A hold starts when the policy gives the VM the device, as a GPU switches to the next VM's
// queued work at once, not when the VM's thread wakes up to use it (on a loaded host that can
// be milliseconds later, and comes out of the VM's own slice): a release hands the device
// straight to the VM that may have it if that VM waits (the first in line, or the current
// slot's owner), and a VM that waited for its slot while the device was free holds it from
// the slot's start. So the recorded intervals are the policy's allocation; a gate's usage()
// is what the job itself got. Waiters sleep on the condition variable until a release, a VM
// powering on or off, their deadline, or (equal and fixed share) the start of their own next
// slot.
#include "vgpu/scheduler.h"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <utility>

#include "vgpu/sliced_gate.h"

namespace ringbench::vgpu {

namespace {

constexpr Policy kPolicies[] = {Policy::best_effort, Policy::equal_share, Policy::fixed_share};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Length of [begin, end] within [from, to], in seconds.
double overlap(Clock::time_point begin, Clock::time_point end, Clock::time_point from,
               Clock::time_point to) {
  const auto b = std::max(begin, from);
  const auto e = std::min(end, to);
  return e > b ? seconds(e - b) : 0.0;
}

}  // namespace

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::best_effort: return "best_effort";
    case Policy::equal_share: return "equal_share";
    case Policy::fixed_share: return "fixed_share";
  }
  return "unknown";
}

Policy parse_policy(const std::string& s) {
  for (Policy p : kPolicies) {
    if (s == policy_name(p)) return p;
  }
  throw std::invalid_argument("unknown vGPU scheduling policy '" + s +
                              "' (expected best_effort, equal_share or fixed_share)");
}

struct SliceScheduler::State {
  SchedulerOptions o;
  Clock::time_point epoch = Clock::now();  // slot 0 starts here

  mutable std::mutex m;
  std::condition_variable cv;
  std::vector<char> on;             // per VM id: powered on
  std::vector<uint64_t> power_gen;  // per VM id: bumped by every power_off
  int holder = -1;
  Clock::time_point held_since, grant_end;
  Clock::time_point free_since = epoch;  // when the device was last released to no one
  std::deque<int> queue;                 // best_effort: the waiting VMs, in arrival order
  std::vector<char> waiting;             // equal and fixed share: per VM id, blocked in acquire()
  std::vector<Clock::time_point> asked;  // per VM id: when its pending acquire() began
  std::vector<BusyInterval> done;
  bool stopped = false;

  explicit State(SchedulerOptions opts)
      : o(opts),
        on(static_cast<size_t>(opts.max_instances), 0),
        power_gen(static_cast<size_t>(opts.max_instances), 0),
        waiting(static_cast<size_t>(opts.max_instances), 0),
        asked(static_cast<size_t>(opts.max_instances)) {}

  bool fifo() const { return o.policy == Policy::best_effort; }

  int64_t slot_of(Clock::time_point t) const { return static_cast<int64_t>((t - epoch) / o.slice); }
  Clock::time_point slot_start(int64_t s) const { return epoch + s * o.slice; }

  // equal_share: the VMs on, in id order.
  std::vector<int> vms_on() const {
    std::vector<int> ids;
    for (int i = 0; i < o.max_instances; ++i) {
      if (on[i]) ids.push_back(i);
    }
    return ids;
  }

  // The first slot at or after `s` that `vm` owns (equal and fixed share; `vm` is on).
  int64_t next_slot(int vm, int64_t s) const {
    int64_t n = o.max_instances, pos = vm;
    if (o.policy == Policy::equal_share) {
      const auto ids = vms_on();
      n = static_cast<int64_t>(ids.size());
      pos = std::find(ids.begin(), ids.end(), vm) - ids.begin();
    }
    return s + ((pos - s % n) % n + n) % n;
  }

  // Who may be granted the free device at `now`, or -1: the first in line, or the current
  // slot's owner if it waits. `*end` gets the end of that grant.
  int next_holder(Clock::time_point now, Clock::time_point* end) const {
    if (fifo()) {
      *end = now + o.slice;
      return queue.empty() ? -1 : queue.front();
    }
    const int64_t s = slot_of(now);
    *end = slot_start(s + 1);
    int owner = static_cast<int>(s % o.max_instances);
    if (o.policy == Policy::equal_share) {
      const auto ids = vms_on();
      if (ids.empty()) return -1;
      owner = ids[static_cast<size_t>(s % static_cast<int64_t>(ids.size()))];
    }
    return waiting[owner] ? owner : -1;
  }

  void grant(int vm, Clock::time_point begin, Clock::time_point end) {
    if (fifo()) dequeue(vm);
    waiting[vm] = 0;
    holder = vm;
    held_since = begin;
    grant_end = end;
  }

  // equal_share: the slots' owners change, and no new owner's hold may start earlier.
  void owners_changed() {
    if (holder < 0) free_since = std::max(free_since, Clock::now());
    cv.notify_all();
  }

  void check_vm(int vm, const char* what) const {
    if (vm < 0 || vm >= o.max_instances) {
      throw std::out_of_range(std::string("vGPU scheduler: ") + what + " of VM " +
                              std::to_string(vm) + ", ids are 0.." +
                              std::to_string(o.max_instances - 1));
    }
  }

  void dequeue(int vm) {
    const auto it = std::find(queue.begin(), queue.end(), vm);
    if (it != queue.end()) queue.erase(it);
  }

  void release_locked(int vm, Clock::time_point now) {
    if (holder != vm) return;
    done.push_back({vm, held_since, now});
    holder = -1;
    Clock::time_point end;
    const int next = stopped ? -1 : next_holder(now, &end);
    if (next >= 0) {
      grant(next, now, end);
    } else {
      free_since = now;
    }
    cv.notify_all();
  }

  double busy(int vm, Clock::time_point from, Clock::time_point to) const {
    std::lock_guard lock(m);
    double sum = 0;
    for (const BusyInterval& i : done) {
      if (vm < 0 || i.vm == vm) sum += overlap(i.begin, i.end, from, to);
    }
    if (holder >= 0 && (vm < 0 || holder == vm)) sum += overlap(held_since, Clock::now(), from, to);
    return sum;
  }
};

SliceScheduler::SliceScheduler(SchedulerOptions o) {
  if (o.max_instances < 1) {
    throw std::invalid_argument("vGPU scheduler: max_instances must be at least 1, not " +
                                std::to_string(o.max_instances));
  }
  if (o.slice.count() <= 0) {
    throw std::invalid_argument("vGPU scheduler: the slice must be positive, not " +
                                std::to_string(o.slice.count()) + " us");
  }
  s_ = std::make_unique<State>(o);
}

SliceScheduler::~SliceScheduler() = default;

const SchedulerOptions& SliceScheduler::options() const { return s_->o; }

int SliceScheduler::power_on() {
  State& st = *s_;
  std::lock_guard lock(st.m);
  for (int i = 0; i < st.o.max_instances; ++i) {
    if (!st.on[i]) {
      st.on[i] = 1;
      st.owners_changed();
      return i;
    }
  }
  throw std::runtime_error("all " + std::to_string(st.o.max_instances) +
                           " vGPU instances are powered on (max_instances " +
                           std::to_string(st.o.max_instances) + ")");
}

void SliceScheduler::power_off(int vm) {
  State& st = *s_;
  std::lock_guard lock(st.m);
  st.check_vm(vm, "power_off");
  if (!st.on[vm]) return;
  st.dequeue(vm);
  st.waiting[vm] = 0;
  st.on[vm] = 0;
  ++st.power_gen[vm];
  st.release_locked(vm, Clock::now());  // to the next owner as the VMs now on decide
  st.owners_changed();
}

Clock::time_point SliceScheduler::acquire(int vm, std::chrono::milliseconds timeout) {
  State& st = *s_;
  const auto deadline = Clock::now() + timeout;
  std::unique_lock lock(st.m);
  st.check_vm(vm, "acquire");
  if (!st.on[vm]) {
    throw std::logic_error("vGPU scheduler: acquire of VM " + std::to_string(vm) +
                           ", which is not powered on");
  }
  if (st.holder == vm) return st.grant_end;
  const uint64_t gen = st.power_gen[vm];
  st.asked[vm] = Clock::now();
  if (st.fifo()) {
    st.queue.push_back(vm);
  } else {
    st.waiting[vm] = 1;
  }
  // Stops waiting (the next in line may now be at the front) and throws.
  auto give_up = [&](const std::string& why) {
    st.dequeue(vm);
    st.waiting[vm] = 0;
    st.cv.notify_all();
    throw std::runtime_error("vGPU VM " + std::to_string(vm) + ": " + why);
  };
  for (;;) {
    if (st.holder == vm) return st.grant_end;  // handed over by a release
    if (st.stopped) give_up("the scheduler is shutting down");
    if (st.power_gen[vm] != gen) give_up("powered off while waiting for a slice");
    const auto now = Clock::now();
    auto wake = deadline;
    if (st.holder < 0) {
      Clock::time_point end;
      if (st.next_holder(now, &end) == vm) {
        // Held since the policy let it: it asked, the device was free, and its slot began.
        auto begin = std::max(st.asked[vm], st.free_since);
        if (!st.fifo()) begin = std::max(begin, st.slot_start(st.slot_of(now)));
        st.grant(vm, begin, end);
        return end;
      }
      if (!st.fifo()) {
        const int64_t s = st.slot_of(now);
        wake = std::min(wake, st.slot_start(st.next_slot(vm, s)));
      }
    }
    if (now >= deadline) {
      give_up("timed out waiting for a slice after " + std::to_string(timeout.count()) + " ms (" +
              policy_name(st.o.policy) + ", " + std::to_string(st.o.max_instances) +
              " instances, " + std::to_string(st.o.slice.count()) + " us slices)");
    }
    st.cv.wait_until(lock, wake);
  }
}

void SliceScheduler::release(int vm) {
  State& st = *s_;
  std::lock_guard lock(st.m);
  st.check_vm(vm, "release");
  st.release_locked(vm, Clock::now());
}

void SliceScheduler::shutdown() {
  State& st = *s_;
  std::lock_guard lock(st.m);
  st.stopped = true;
  st.cv.notify_all();
}

double SliceScheduler::busy_seconds(Clock::time_point from, Clock::time_point to) const {
  return s_->busy(-1, from, to);
}

double SliceScheduler::busy_seconds(int vm, Clock::time_point from, Clock::time_point to) const {
  s_->check_vm(vm, "busy_seconds");
  return s_->busy(vm, from, to);
}

std::vector<BusyInterval> SliceScheduler::intervals() const {
  std::lock_guard lock(s_->m);
  return s_->done;
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
