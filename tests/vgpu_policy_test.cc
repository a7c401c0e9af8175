// The vGPU time-slice policies (vgpu/slice_policy.h) on a synthetic workload in simulated
// time: VMs that are always busy run back-to-back device ops and check, after each, whether
// their slice has ended (as the trainer's gate does between layers); the simulation advances a
// virtual clock from event to event, so the shares are exact and no host load can move them.
// The scheduler's threads, condition variable and socket are tested in vgpu_scheduler_test.
//
// Tolerance: one slot of the window (1 s of 10 ms slices: 0.01), for slots the window's edge
// splits between VMs; nothing else varies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <vector>

#include "vgpu/slice_policy.h"

namespace ringbench::vgpu {
namespace {

using namespace std::chrono_literals;
using Time = Clock::time_point;
using Us = std::chrono::microseconds;

constexpr Us kSlice = 10ms;
constexpr Us kOp = 200us;
constexpr Us kWindow = 1s;
constexpr double kTol = 0.01;
const Time kT0{};  // the simulation's epoch
constexpr Time kNever = Time::max();

SchedulerOptions options(Policy p, int max_instances) { return {p, max_instances, kSlice}; }

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Busy VMs, each a thread in the real scheduler: ask, wait until granted, run ops; at each op's
// end, if the slice is over, release and ask again; stop at the first check after `stop`.
// `wake` is how long a woken thread takes to run again (0: at once; a loaded host: more).
class Simulation {
 public:
  Simulation(SchedulerOptions o, Us op = kOp, Us wake = 0us) : p(o, kT0), op_(op), wake_(wake) {}

  int add_vm(bool busy, Time start = kT0) {
    const int id = p.power_on(start);
    vms_.push_back({id, busy ? State::waiting : State::idle, busy ? start : kNever});
    if (busy) p.ask(id, start);
    return id;
  }
  void power_off_at(int vm, Time t) { offs_.push_back({vm, t}); }

  // Runs until every busy VM has stopped (its first check at or after `stop`).
  void run(Time stop) {
    for (int guard = 0; guard < 10'000'000; ++guard) {
      Vm* next = nullptr;
      for (Vm& v : vms_) {
        if (v.state != State::idle && v.state != State::stopped && (!next || v.next < next->next)) next = &v;
      }
      Time off_at = kNever;
      for (const auto& o : offs_) off_at = std::min(off_at, o.second);
      if (off_at != kNever && (!next || off_at <= next->next)) {
        power_off_due(off_at);
        continue;
      }
      if (!next || next->next == kNever) return;
      step(*next, stop);
    }
    FAIL() << "the simulation did not end";
  }

  double share(int vm, Time from, Time to) const { return p.busy(vm, from, to, to) / secs(to - from); }

  SlicePolicy p;

 private:
  enum class State { idle, waiting, running, stopped };
  struct Vm {
    int id;
    State state;
    Time next;  // when its thread runs next (kNever: until woken)
  };

  void step(Vm& v, Time stop) {
    now_ = v.next;
    if (v.state == State::waiting) {
      Time retry;
      if (p.poll(v.id, now_, &retry)) {
        v.state = State::running;
        v.next = now_ + op_;
      } else {
        v.next = retry == kNever ? kNever : retry + wake_;
      }
      return;
    }
    // Running: an op ended; the gate's checkpoint.
    if (now_ >= stop) {
      release(v.id);
      v.state = State::stopped;
    } else if (now_ >= p.grant_end()) {
      release(v.id);
      p.ask(v.id, now_);
      v.state = State::waiting;
      v.next = now_;
    } else {
      v.next = now_ + op_;
    }
  }

  // A release wakes every waiter (the condition variable's notify_all).
  void release(int vm) {
    p.release(vm, now_);
    for (Vm& w : vms_) {
      if (w.state == State::waiting) w.next = std::min(w.next, now_ + wake_);
    }
  }

  void power_off_due(Time t) {
    now_ = t;
    for (auto it = offs_.begin(); it != offs_.end();) {
      if (it->second != t) {
        ++it;
        continue;
      }
      p.power_off(it->first, t);
      for (Vm& w : vms_) {
        if (w.id == it->first) w.state = State::stopped;
        if (w.state == State::waiting) w.next = std::min(w.next, t + wake_);  // owners changed
      }
      it = offs_.erase(it);
    }
  }

  Us op_, wake_;
  Time now_ = kT0;
  std::vector<Vm> vms_;
  std::vector<std::pair<int, Time>> offs_;
};

// Runs `busy` busy VMs and `idle` powered-on idle ones for the window; returns each one's share.
std::vector<double> shares(Policy policy, int max_instances, int busy, int idle = 0,
                           Us op = kOp, Us wake = 0us) {
  Simulation sim(options(policy, max_instances), op, wake);
  std::vector<int> ids;
  for (int i = 0; i < busy; ++i) ids.push_back(sim.add_vm(true));
  for (int i = 0; i < idle; ++i) ids.push_back(sim.add_vm(false));
  sim.run(kT0 + kWindow);
  std::vector<double> out;
  std::printf("%s, %d of %d busy, op %lld us, wake %lld us:", policy == Policy::best_effort ? "best_effort"
              : policy == Policy::equal_share ? "equal_share" : "fixed_share",
              busy, max_instances, static_cast<long long>(op.count()),
              static_cast<long long>(wake.count()));
  for (int id : ids) {
    out.push_back(sim.share(id, kT0, kT0 + kWindow));
    std::printf(" %.4f", out.back());
  }
  std::printf("\n");
  // Never two holders at once: the holds, in grant order, do not overlap.
  const auto& held = sim.p.intervals();
  for (size_t i = 1; i < held.size(); ++i) EXPECT_LE(held[i - 1].end, held[i].begin) << "hold " << i;
  return out;
}

// `busy` busy VMs and `idle` idle ones, powered on: each busy one gets `each` of the device, each
// idle one nothing.
struct ShareCase {
  const char* name;
  Policy policy;
  int max_instances, busy, idle;
  double each;
};

class VgpuPolicyShare : public ::testing::TestWithParam<ShareCase> {};

TEST_P(VgpuPolicyShare, EachBusyVmGetsItsShare) {
  const ShareCase& c = GetParam();
  const auto s = shares(c.policy, c.max_instances, c.busy, c.idle);
  ASSERT_EQ(s.size(), size_t(c.busy + c.idle));
  for (int i = 0; i < c.busy; ++i) EXPECT_NEAR(s[size_t(i)], c.each, kTol) << "VM " << i;
  for (int i = c.busy; i < c.busy + c.idle; ++i) EXPECT_EQ(s[size_t(i)], 0.0) << "VM " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, VgpuPolicyShare,
    ::testing::Values(ShareCase{"FixedShareOneOfFourGetsAQuarter", Policy::fixed_share, 4, 1, 0, 0.25},
                      ShareCase{"FixedShareTwoOfFourGetAQuarterEach", Policy::fixed_share, 4, 2, 0, 0.25},
                      ShareCase{"FixedShareFourOfFourFillTheDevice", Policy::fixed_share, 4, 4, 0, 0.25},
                      // The other VM is on but has no work: it yields its slot (equal_share would not).
                      ShareCase{"BestEffortAloneGetsTheWholeDevice", Policy::best_effort, 4, 1, 1, 1.0},
                      ShareCase{"BestEffortTwoBusySplitInHalves", Policy::best_effort, 4, 2, 0, 0.5},
                      ShareCase{"BestEffortThreeBusyGetAThirdEach", Policy::best_effort, 4, 3, 0, 1.0 / 3},
                      ShareCase{"EqualShareIdleVmStillTakesItsHalf", Policy::equal_share, 4, 1, 1, 0.5},
                      ShareCase{"EqualShareThreeBusyGetAThirdEach", Policy::equal_share, 4, 3, 0, 1.0 / 3},
                      ShareCase{"EqualShareAloneGetsTheWholeDevice", Policy::equal_share, 4, 1, 0, 1.0}),
    [](const ::testing::TestParamInfo<ShareCase>& c) { return std::string(c.param.name); });

// Ops of 3 ms do not divide a 10 ms slice: a VM sees its slice over at 12 ms and keeps the
// device until then. The overrun is charged to it (12 ms of every 40: 0.30), and the next
// slot's owner gets only what is left of its slot.
TEST(VgpuPolicyOverrun, IsChargedToTheVmThatOverran) {
  const auto alone = shares(Policy::fixed_share, 4, 1, 0, 3ms);
  EXPECT_NEAR(alone[0], 0.30, kTol);
  const auto pair = shares(Policy::fixed_share, 2, 2, 0, 3ms);
  // VM 0 holds [0, 12), VM 1 the rest of its slot, [12, 21) (it checks at 15, 18, 21), VM 0
  // [21, 30), and so on: the device stays busy and both get about half.
  EXPECT_NEAR(pair[0] + pair[1], 1.0, kTol);
  EXPECT_NEAR(pair[0], 0.5, 0.03);
  EXPECT_NEAR(pair[1], 0.5, 0.03);
}

// A loaded host: every woken thread runs 2 ms late. Holds start when the policy grants (a
// release hands over at once; a VM waiting for its own slot holds it from the slot's start,
// whenever its thread wakes), so best effort still splits evenly and fills the device, and
// fixed share still gives a quarter: the device's allocation does not depend on the host.
TEST(VgpuPolicyLoadedHost, LateWakeUpsCostOnlyWhatTheyMustCost) {
  const auto be = shares(Policy::best_effort, 2, 2, 0, kOp, 2ms);
  EXPECT_NEAR(be[0], 0.5, kTol);
  EXPECT_NEAR(be[1], 0.5, kTol);
  EXPECT_NEAR(be[0] + be[1], 1.0, kTol);
  const auto fixed = shares(Policy::fixed_share, 4, 1, 0, kOp, 2ms);
  EXPECT_NEAR(fixed[0], 0.25, kTol);
}

// equal_share follows the VMs that are on: three share the device in thirds until one powers
// off half-way, then the other two take halves.
TEST(VgpuPolicyPower, EqualShareFollowsTheVmsThatAreOn) {
  Simulation sim(options(Policy::equal_share, 4));
  const int a = sim.add_vm(true), b = sim.add_vm(true), c = sim.add_vm(true);
  const Time half = kT0 + kWindow / 2, end = kT0 + kWindow;
  sim.power_off_at(c, half);
  sim.run(end);
  EXPECT_NEAR(sim.share(a, kT0, half), 1.0 / 3, 2 * kTol);
  EXPECT_NEAR(sim.share(b, kT0, half), 1.0 / 3, 2 * kTol);
  EXPECT_NEAR(sim.share(c, kT0, half), 1.0 / 3, 2 * kTol);
  EXPECT_NEAR(sim.share(a, half, end), 0.5, 2 * kTol);
  EXPECT_NEAR(sim.share(b, half, end), 0.5, 2 * kTol);
  EXPECT_EQ(sim.share(c, half + kSlice, end), 0.0);
}

// fixed_share does not: the slots of VMs that are off stay idle.
TEST(VgpuPolicyPower, FixedShareKeepsTheSlotsOfVmsThatAreOff) {
  Simulation sim(options(Policy::fixed_share, 4));
  const int a = sim.add_vm(true), b = sim.add_vm(true);
  const Time half = kT0 + kWindow / 2, end = kT0 + kWindow;
  sim.power_off_at(b, half);
  sim.run(end);
  EXPECT_NEAR(sim.share(a, kT0, half), 0.25, 2 * kTol);
  EXPECT_NEAR(sim.share(b, kT0, half), 0.25, 2 * kTol);
  EXPECT_NEAR(sim.share(a, half, end), 0.25, 2 * kTol);
}

// Each grant of equal and fixed share begins inside a slot its VM owns, and ends at that
// slot's end; best effort grants a whole slice from the grant.
TEST(VgpuPolicyGrant, GrantEndsAreTheOwnSlotsEnd) {
  SlicePolicy p(options(Policy::fixed_share, 4), kT0);
  const int a = p.power_on(kT0), b = p.power_on(kT0);
  Time retry;
  p.ask(b, kT0 + 1ms);
  EXPECT_FALSE(p.poll(b, kT0 + 1ms, &retry));  // slot 0 is VM 0's
  EXPECT_EQ(retry, kT0 + kSlice);               // VM 1's own slot
  EXPECT_TRUE(p.poll(b, kT0 + kSlice, &retry));
  EXPECT_EQ(p.grant_end(), kT0 + 2 * kSlice);
  p.ask(a, kT0 + 15ms);
  EXPECT_FALSE(p.poll(a, kT0 + 15ms, &retry));
  EXPECT_EQ(retry, kNever);  // the holder's release decides
  p.release(b, kT0 + 25ms);  // overran into slot 2, which is nobody's
  EXPECT_EQ(p.holder(), -1);
  EXPECT_TRUE(p.poll(a, kT0 + 4 * kSlice, &retry));
  ASSERT_EQ(p.intervals().size(), 1u);
  EXPECT_EQ(p.intervals()[0].begin, kT0 + kSlice);  // from its slot's start, not a thread's wake-up
  EXPECT_EQ(p.intervals()[0].end, kT0 + 25ms);

  SlicePolicy be(options(Policy::best_effort, 2), kT0);
  const int x = be.power_on(kT0), y = be.power_on(kT0);
  be.ask(x, kT0 + 3ms);
  EXPECT_TRUE(be.poll(x, kT0 + 3ms, &retry));
  EXPECT_EQ(be.grant_end(), kT0 + 3ms + kSlice);
  be.ask(y, kT0 + 4ms);
  be.release(x, kT0 + 14ms);
  EXPECT_EQ(be.holder(), y);  // handed over at the release
  EXPECT_EQ(be.grant_end(), kT0 + 14ms + kSlice);
}

// A scheduler shutting down powers its VMs off without handing the device to a waiter.
TEST(VgpuPolicyGrant, PowerOffWithoutHandOverLeavesTheDeviceFree) {
  SlicePolicy p(options(Policy::best_effort, 2), kT0);
  const int a = p.power_on(kT0), b = p.power_on(kT0);
  Time retry;
  p.ask(a, kT0);
  ASSERT_TRUE(p.poll(a, kT0, &retry));
  p.ask(b, kT0 + 1ms);
  p.power_off(a, kT0 + 2ms, /*hand_over=*/false);
  EXPECT_EQ(p.holder(), -1);
  p.power_off(b, kT0 + 2ms, false);
  EXPECT_EQ(p.holder(), -1);
  ASSERT_EQ(p.intervals().size(), 1u);
  EXPECT_EQ(p.intervals()[0].end, kT0 + 2ms);
}

TEST(VgpuPolicyGrant, BadOptionsAndIdsAreErrors) {
  EXPECT_THROW(SlicePolicy(options(Policy::fixed_share, 0), kT0), std::invalid_argument);
  SchedulerOptions zero = options(Policy::best_effort, 1);
  zero.slice = 0us;
  EXPECT_THROW(SlicePolicy(zero, kT0), std::invalid_argument);
  SlicePolicy p(options(Policy::best_effort, 2), kT0);
  EXPECT_THROW(p.ask(2, kT0), std::out_of_range);
  EXPECT_THROW(p.release(-1, kT0), std::out_of_range);
}

}  // namespace
}  // namespace ringbench::vgpu
