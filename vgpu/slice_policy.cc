// best_effort hands the device to the waiting VMs in arrival order, `slice` at a time: a VM
// that gives the device up at the end of its slice and asks again queues behind the others.
// equal_share and fixed_share cut time into slots of `slice` counted from the epoch; slot s
// belongs to the (s mod n)-th powered-on VM in id order (n VMs on), or to VM s mod
// max_instances, and only its owner may be granted during it, up to the slot's end. An owner
// without work leaves its slot idle. Nobody is preempted: a holder keeps the device until it
// releases (at its next checkpoint after the grant end), and if it overran into the next slot,
// that slot's owner gets what is left of it; the overrun is charged to the VM that overran.
//
// A hold starts when the policy gives the VM the device, as a GPU switches to the next VM's
// queued work at once, not when the VM's thread gets round to asking again (on a loaded host
// that can be milliseconds later, and comes out of the VM's own slice): a release hands the
// device straight to the VM that may have it if that VM waits, and a VM that waited for its
// slot while the device was free holds it from the slot's start.
#include "vgpu/slice_policy.h"
#include "base/errors.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ringbench::vgpu {

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Length of [begin, end] within [from, to], in seconds.
double overlap(Clock::time_point begin, Clock::time_point end, Clock::time_point from,
               Clock::time_point to) {
  const auto b = std::max(begin, from);
  const auto e = std::min(end, to);
  return e > b ? seconds(e - b) : 0.0;
}

}  // namespace

SlicePolicy::SlicePolicy(SchedulerOptions o, Clock::time_point epoch)
    : o_(o), epoch_(epoch), free_since_(epoch) {
  if (o.max_instances < 1) {
    throw std::invalid_argument("vGPU scheduler: max_instances must be at least 1, not " +
                                std::to_string(o.max_instances));
  }
  if (o.slice.count() <= 0) {
    throw std::invalid_argument("vGPU scheduler: the slice must be positive, not " +
                                std::to_string(o.slice.count()) + " us");
  }
  const auto n = static_cast<size_t>(o.max_instances);
  on_.assign(n, 0);
  waiting_.assign(n, 0);
  asked_.assign(n, {});
}

void SlicePolicy::check_vm(int vm, const char* what) const {
  if (vm < 0 || vm >= o_.max_instances) {
    throw std::out_of_range(std::string("vGPU scheduler: ") + what + " of VM " +
                            std::to_string(vm) + ", ids are 0.." +
                            std::to_string(o_.max_instances - 1));
  }
}

bool SlicePolicy::is_on(int vm) const {
  check_vm(vm, "is_on");
  return on_[vm] != 0;
}

int64_t SlicePolicy::slot_of(Clock::time_point t) const {
  return t < epoch_ ? 0 : static_cast<int64_t>((t - epoch_) / o_.slice);
}

std::vector<int> SlicePolicy::vms_on() const {
  std::vector<int> ids;
  for (int i = 0; i < o_.max_instances; ++i) {
    if (on_[i]) ids.push_back(i);
  }
  return ids;
}

// The first slot at or after `s` that `vm` owns (equal and fixed share; `vm` is on).
int64_t SlicePolicy::next_slot(int vm, int64_t s) const {
  int64_t n = o_.max_instances, pos = vm;
  if (o_.policy == Policy::equal_share) {
    const auto ids = vms_on();
    n = static_cast<int64_t>(ids.size());
    pos = std::find(ids.begin(), ids.end(), vm) - ids.begin();
  }
  return s + ((pos - s % n) % n + n) % n;
}

// Who may be granted the free device at `now`, or -1: the first in line, or the current
// slot's owner if it waits. `*end` gets the end of that grant.
int SlicePolicy::next_holder(Clock::time_point now, Clock::time_point* end) const {
  if (fifo()) {
    *end = now + o_.slice;
    return queue_.empty() ? -1 : queue_.front();
  }
  const int64_t s = slot_of(now);
  *end = slot_start(s + 1);
  int owner = static_cast<int>(s % o_.max_instances);
  if (o_.policy == Policy::equal_share) {
    const auto ids = vms_on();
    if (ids.empty()) return -1;
    owner = ids[static_cast<size_t>(s % static_cast<int64_t>(ids.size()))];
  }
  return waiting_[owner] ? owner : -1;
}

void SlicePolicy::grant(int vm, Clock::time_point begin, Clock::time_point end) {
  dequeue(vm);
  waiting_[vm] = 0;
  holder_ = vm;
  held_since_ = begin;
  grant_end_ = end;
}

// equal_share: the slots' owners change, and no new owner's hold may start earlier.
void SlicePolicy::owners_changed(Clock::time_point now) {
  if (holder_ < 0) free_since_ = std::max(free_since_, now);
}

void SlicePolicy::dequeue(int vm) {
  const auto it = std::find(queue_.begin(), queue_.end(), vm);
  if (it != queue_.end()) queue_.erase(it);
}

int SlicePolicy::power_on(Clock::time_point now) {
  for (int i = 0; i < o_.max_instances; ++i) {
    if (!on_[i]) {
      on_[i] = 1;
      owners_changed(now);
      return i;
    }
  }
  throw Error("all " + std::to_string(o_.max_instances) +
                           " vGPU instances are powered on (max_instances " +
                           std::to_string(o_.max_instances) + ")");
}

void SlicePolicy::power_off(int vm, Clock::time_point now, bool hand_over) {
  check_vm(vm, "power_off");
  if (!on_[vm]) return;
  cancel(vm);
  on_[vm] = 0;
  release(vm, now, hand_over);  // to the next owner as the VMs now on decide
  owners_changed(now);
}

void SlicePolicy::ask(int vm, Clock::time_point now) {
  check_vm(vm, "ask");
  if (holder_ == vm) return;
  asked_[vm] = now;
  if (fifo()) {
    if (std::find(queue_.begin(), queue_.end(), vm) == queue_.end()) queue_.push_back(vm);
  } else {
    waiting_[vm] = 1;
  }
}

bool SlicePolicy::poll(int vm, Clock::time_point now, Clock::time_point* retry) {
  check_vm(vm, "poll");
  *retry = Clock::time_point::max();
  if (holder_ == vm) return true;  // handed over by a release
  if (holder_ >= 0) return false;  // its release will decide
  Clock::time_point end;
  if (next_holder(now, &end) == vm) {
    // Held since the policy let it: it asked, the device was free, and its slot began.
    auto begin = std::max(asked_[vm], free_since_);
    if (!fifo()) begin = std::max(begin, slot_start(slot_of(now)));
    grant(vm, begin, end);
    return true;
  }
  if (!fifo() && on_[vm]) *retry = slot_start(next_slot(vm, slot_of(now)));
  return false;
}

void SlicePolicy::cancel(int vm) {
  check_vm(vm, "cancel");
  dequeue(vm);
  waiting_[vm] = 0;
}

void SlicePolicy::release(int vm, Clock::time_point now, bool hand_over) {
  check_vm(vm, "release");
  if (holder_ != vm) return;
  done_.push_back({vm, held_since_, now});
  holder_ = -1;
  Clock::time_point end;
  const int next = hand_over ? next_holder(now, &end) : -1;
  if (next >= 0) {
    grant(next, now, end);
  } else {
    free_since_ = now;
  }
}

double SlicePolicy::busy(int vm, Clock::time_point from, Clock::time_point to,
                         Clock::time_point now) const {
  double sum = 0;
  for (const BusyInterval& i : done_) {
    if (vm < 0 || i.vm == vm) sum += overlap(i.begin, i.end, from, to);
  }
  if (holder_ >= 0 && (vm < 0 || holder_ == vm)) sum += overlap(held_since_, now, from, to);
  return sum;
}

}  // namespace ringbench::vgpu
