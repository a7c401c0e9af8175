// The vGPU time-slice scheduler (vgpu/scheduler.h): the policies of vgpu/slice_policy.h (whose
// shares vgpu_policy_test checks exactly, in simulated time) behind threads, a condition
// variable and a Unix socket. Here: policy names, powering VMs on and off, timeouts, and
// what must hold however slow the host is — holds never overlap, and every equal- and
// fixed-share grant begins inside a slot its VM owns — with threads as VMs running
// back-to-back 200 us "device ops" and a checkpoint between them. The shares these threads
// get in wall time are a benchmark (bench/vgpu_share_bench), not a test: on a loaded 2-core
// host a thread's late wake-ups and overruns move them by tens of points.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "vgpu/scheduler.h"

namespace ringbench::vgpu {
namespace {

using namespace std::chrono_literals;
using models::DeviceGate;

constexpr std::chrono::microseconds kSlice = 10ms;
constexpr std::chrono::microseconds kOp = 200us;
constexpr std::chrono::milliseconds kTimeout = 2s;

SchedulerOptions options(Policy p, int max_instances, std::chrono::microseconds slice = kSlice) {
  return {p, max_instances, slice};
}

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// What a call that should fail said: the std::runtime_error's message (`otherwise` when the
// call returned), and how long it took in seconds.
struct Failure {
  std::string error;
  double took;
};

Failure failure_of(const std::function<void()>& call, const std::string& otherwise) {
  const auto t0 = Clock::now();
  std::string error = otherwise;
  try {
    call();
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  return {error, secs(Clock::now() - t0)};
}

// One synthetic device op: the thread waits `d` for it, as a host thread waits for a kernel.
// It sleeps rather than spins: on a loaded 2-core machine the kernel's CPU scheduler preempts
// a spinning holder for milliseconds at a time, which stretches its holds (5 ms slices held a
// median 6.8 ms, equal_share's 50% measured 63%) and tests the host's CPU, not the policy.
void device_op(std::chrono::microseconds d) { std::this_thread::sleep_for(d); }

struct Window {
  Clock::time_point begin, end;
};

// Runs one thread per factory as a VM with work all the time: it makes its gate, then from a
// common start enters once and runs device ops with a checkpoint after each until the window
// ends and `enough()` (if given) holds, then leaves; a slow machine therefore stretches the
// window instead of failing a count (up to 30 s). Returns the window; `usage` gets each
// gate's usage.
Window run_busy_vms(const std::vector<std::function<std::unique_ptr<DeviceGate>()>>& make,
                    std::chrono::microseconds window, std::vector<DeviceGate::Usage>* usage,
                    const std::function<bool()>& enough = {}) {
  const auto n = static_cast<std::ptrdiff_t>(make.size());
  std::latch ready(n), go(1);
  Window w;
  std::vector<std::string> errors(make.size());
  usage->assign(make.size(), {});
  std::vector<std::thread> threads;
  for (size_t i = 0; i < make.size(); ++i) {
    threads.emplace_back([&, i] {
      std::unique_ptr<DeviceGate> gate;
      try {
        gate = make[i]();
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
      ready.count_down();
      go.wait();
      if (!gate) return;
      try {
        gate->enter();
        auto more = [&] {
          const auto now = Clock::now();
          return now < w.end || (enough && now < w.begin + 30s && !enough());
        };
        while (more()) {
          device_op(kOp);
          gate->checkpoint();
        }
        gate->leave();
        (*usage)[i] = gate->usage();
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  ready.wait();
  w.begin = Clock::now();
  w.end = w.begin + window;
  go.count_down();
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < errors.size(); ++i) EXPECT_EQ(errors[i], "") << "VM thread " << i;
  return w;
}

// Every grant of equal and fixed share begins inside a slot its VM owns (`n` VMs on, all the
// time), and holds never overlap.
void expect_policy_held(const SliceScheduler& s, int n) {
  const auto held = s.intervals();
  const Policy p = s.options().policy;
  const auto slice = s.options().slice;
  for (size_t i = 0; i < held.size(); ++i) {
    EXPECT_LE(held[i].begin, held[i].end);
    if (i > 0) {
      EXPECT_LE(held[i - 1].end, held[i].begin)
          << "VM " << held[i].vm << " was granted before VM " << held[i - 1].vm << " released";
    }
    if (p == Policy::best_effort) continue;
    const int64_t slot = (held[i].begin - s.epoch()) / slice;
    const int64_t slots = p == Policy::fixed_share ? s.options().max_instances : n;
    EXPECT_EQ(slot % slots, held[i].vm) << "hold " << i << " of VM " << held[i].vm
                                        << " began in slot " << slot;
  }
}

std::string socket_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("rb-vgpu-" + std::to_string(::getpid()) + "-" + name + ".sock"))
      .string();
}

TEST(VgpuSchedulerPolicy, NamesRoundTripAndBadNameListsThem) {
  for (Policy p : {Policy::best_effort, Policy::equal_share, Policy::fixed_share}) {
    EXPECT_EQ(parse_policy(policy_name(p)), p);
  }
  try {
    parse_policy("round_robin");
    FAIL() << "parse_policy accepted round_robin";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "round_robin")) << msg;
    for (const char* name : {"best_effort", "equal_share", "fixed_share"}) {
      EXPECT_TRUE(contains(msg, name)) << msg;
    }
  }
}

TEST(VgpuSchedulerPower, LowestFreeIdAndNoMoreThanMax) {
  SliceScheduler s(options(Policy::equal_share, 3));
  EXPECT_EQ(s.power_on(), 0);
  EXPECT_EQ(s.power_on(), 1);
  EXPECT_EQ(s.power_on(), 2);
  try {
    s.power_on();
    FAIL() << "a fourth VM powered on with max_instances 3";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "all 3 vGPU instances")) << e.what();
  }
  s.power_off(1);
  EXPECT_EQ(s.power_on(), 1);
  EXPECT_THROW(SliceScheduler(options(Policy::fixed_share, 0)), std::invalid_argument);
}

TEST(VgpuSchedulerAcquire, TimesOutNamingTheVmAndTheTimeout) {
  SliceScheduler s(options(Policy::fixed_share, 2));
  const int a = s.power_on(), b = s.power_on();
  s.acquire(a, kTimeout);  // and never released
  const auto [error, took] = failure_of([&] { s.acquire(b, 50ms); }, "granted while VM 0 held the device");
  EXPECT_TRUE(contains(error, "VM " + std::to_string(b))) << error;
  EXPECT_TRUE(contains(error, "50 ms")) << error;
  EXPECT_GE(took, 0.050);
  EXPECT_LT(took, 1.0);
}

TEST(VgpuSchedulerAcquire, PowerOffReleasesTheDevice) {
  SliceScheduler s(options(Policy::best_effort, 2));
  const int a = s.power_on(), b = s.power_on();
  s.acquire(a, kTimeout);
  s.power_off(a);
  s.acquire(b, 100ms);  // would time out if a still held it
  s.release(b);
  const auto held = s.intervals();
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].vm, a);
  EXPECT_EQ(held[1].vm, b);
  EXPECT_LE(held[0].end, held[1].begin);
}

// VM 0 keeps the device past its slot; VM 1, waiting for the next slot, gets the rest of it.
TEST(VgpuSchedulerAcquire, OverrunLeavesTheNextOwnerTheRestOfItsSlot) {
  constexpr std::chrono::microseconds slot = 100ms;
  SliceScheduler s(options(Policy::fixed_share, 2, slot));
  const int a = s.power_on(), b = s.power_on();
  const auto end_a = s.acquire(a, kTimeout);
  Clock::time_point end_b;
  std::jthread waiter([&] { end_b = s.acquire(b, kTimeout); });
  std::this_thread::sleep_until(end_a + 10ms);
  s.release(a);
  waiter.join();
  s.release(b);
  EXPECT_EQ(end_b, end_a + slot);
  const auto held = s.intervals();
  ASSERT_EQ(held.size(), 2u);
  EXPECT_GE(held[0].end, end_a + 10ms);
  EXPECT_GE(held[1].begin, held[0].end);
  EXPECT_LT(held[1].begin, held[0].end + 50ms);  // at once, unless the waiter started late
}

TEST(VgpuSchedulerGate, MisuseIsHarmless) {
  SliceScheduler s(options(Policy::best_effort, 1));
  auto gate = make_local_gate(s, s.power_on(), kTimeout);
  gate->leave();       // not inside: nothing
  gate->checkpoint();  // not inside: nothing
  EXPECT_EQ(gate->usage().slices, 0);
  gate->enter();
  gate->enter();  // already inside: keeps the grant
  device_op(kOp);
  gate->leave();
  gate->leave();
  const auto u = gate->usage();
  EXPECT_EQ(u.slices, 1);
  EXPECT_GT(u.held_s, 0.0);
  EXPECT_EQ(s.intervals().size(), 1u);
}

// Short slices and many hand-overs, under every policy: holds never overlap, and equal and
// fixed share grant only in the VM's own slots.
TEST(VgpuSchedulerShare, HoldersNeverOverlapAndGrantsAreInOwnSlots) {
  for (Policy p : {Policy::best_effort, Policy::equal_share, Policy::fixed_share}) {
    SCOPED_TRACE(policy_name(p));
    SliceScheduler s(options(p, 3, 2ms));
    std::vector<std::function<std::unique_ptr<DeviceGate>()>> make;
    for (int i = 0; i < 3; ++i) {
      make.push_back([&s, vm = s.power_on()] { return make_local_gate(s, vm, kTimeout); });
    }
    std::vector<DeviceGate::Usage> usage;
    // at least 30 hand-overs (150 slots in 300 ms), however long a loaded machine takes for them
    run_busy_vms(make, 300ms, &usage, [&s] { return s.intervals().size() >= 30; });
    EXPECT_GE(s.intervals().size(), 30u);
    expect_policy_held(s, 3);
    for (const auto& u : usage) EXPECT_GT(u.slices, 0);
  }
}

TEST(VgpuSchedulerServer, TwoClientsGetSlicesInTheirOwnSlots) {
  SchedulerServer server(socket_path("own"), options(Policy::fixed_share, 2));
  const std::string path = server.path();
  std::vector<std::function<std::unique_ptr<DeviceGate>()>> make(
      2, [&path] { return connect_gate(path, kTimeout); });
  std::vector<DeviceGate::Usage> usage;
  run_busy_vms(make, 300ms, &usage);
  for (const auto& u : usage) EXPECT_GT(u.slices, 0);
  expect_policy_held(server.scheduler(), 2);
}

TEST(VgpuSchedulerServer, DestroyedWhileAClientWaitsFailsItsEnter) {
  auto server =
      std::make_unique<SchedulerServer>(socket_path("gone"), options(Policy::best_effort, 2));
  const std::string path = server->path();
  auto holder = connect_gate(path, kTimeout);
  holder->enter();  // and keeps the device
  Failure waited{};
  std::jthread waiter([&] {
    try {
      auto gate = connect_gate(path, kTimeout);
      waited = failure_of([&] { gate->enter(); }, "granted");
    } catch (const std::exception& e) {
      waited.error = std::string("connect: ") + e.what();
    }
  });
  // Lets the waiter block in enter(); had it not yet, its enter() must fail all the same.
  std::this_thread::sleep_for(200ms);
  server.reset();
  waiter.join();
  const auto& [error, took] = waited;
  std::printf("the waiter's enter(): %s\n", error.c_str());
  EXPECT_TRUE(contains(error, "vGPU scheduler at " + path + ": ")) << error;
  EXPECT_LT(took, secs(kTimeout)) << error;
  EXPECT_FALSE(std::filesystem::exists(path));
  // The holder finds out at its next request (its slice ended long ago).
  EXPECT_THROW(holder->checkpoint(), std::runtime_error);
  EXPECT_THROW(holder->enter(), std::runtime_error);
}

TEST(VgpuSchedulerServer, DisconnectPowersTheVmOff) {
  SchedulerServer server(socket_path("off"), options(Policy::fixed_share, 1));
  auto first = connect_gate(server.path(), kTimeout);
  try {
    connect_gate(server.path(), kTimeout);
    FAIL() << "a second VM connected with max_instances 1";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), server.path())) << e.what();
    EXPECT_TRUE(contains(e.what(), "all 1 vGPU instances")) << e.what();
  }
  first->enter();
  first.reset();  // closes the connection while holding
  // The server powers VM 0 off once it reads the end of the connection; until then a new VM
  // is turned away.
  std::unique_ptr<DeviceGate> second;
  const auto deadline = Clock::now() + kTimeout;
  while (!second) {
    try {
      second = connect_gate(server.path(), kTimeout);
    } catch (const std::runtime_error& e) {
      ASSERT_LT(Clock::now(), deadline) << e.what();
      std::this_thread::sleep_for(10ms);
    }
  }
  second->enter();
  second->leave();
  EXPECT_EQ(second->usage().slices, 1);
  // Powering the first VM off ended its hold (the second's, released without an answer, may
  // not be recorded yet).
  const auto held = server.scheduler().intervals();
  ASSERT_GE(held.size(), 1u);
  EXPECT_EQ(held[0].vm, 0);
}

TEST(VgpuSchedulerServer, NoServerTimesOutNamingThePath) {
  const std::string path = socket_path("none");
  const auto [error, took] = failure_of([&] { connect_gate(path, 100ms); }, "connected to nothing");
  EXPECT_TRUE(contains(error, "vGPU scheduler at " + path)) << error;
  EXPECT_TRUE(contains(error, "100 ms")) << error;
  EXPECT_GE(took, 0.1);
  EXPECT_LT(took, 1.0);
}

TEST(VgpuSchedulerServer, ClientWaitsForALateServer) {
  const std::string path = socket_path("late");
  std::unique_ptr<SchedulerServer> server;
  std::jthread starter([&] {
    std::this_thread::sleep_for(100ms);
    server = std::make_unique<SchedulerServer>(path, options(Policy::best_effort, 1));
  });
  auto gate = connect_gate(path, kTimeout);
  starter.join();
  gate->enter();
  gate->leave();
  EXPECT_EQ(gate->usage().slices, 1);
}

// VMs sharing the device measure together: no VM leaves the barrier before the last arrives,
// however late that one is, and after its measured steps a VM learns whether others still
// measure (the last to finish is told none does).
TEST(VgpuMeasureBarrier, NoVmStartsMeasuringBeforeTheLastArrives) {
  SchedulerServer server(socket_path("barrier"), options(Policy::equal_share, 3), 3);
  std::atomic<int> arrived{0};
  std::vector<int> arrived_when_released(3, -1);
  std::vector<std::jthread> vms;
  for (int i = 0; i < 3; ++i)
    vms.emplace_back([&, i] {
      auto gate = connect_gate(server.path(), kTimeout);
      std::this_thread::sleep_for(i * 100ms);  // VM 2 arrives 200 ms after VM 0
      ++arrived;
      gate->begin_measuring();
      arrived_when_released[size_t(i)] = arrived.load();
    });
  vms.clear();  // joins
  for (int i = 0; i < 3; ++i) EXPECT_EQ(arrived_when_released[size_t(i)], 3) << "VM " << i;
}

TEST(VgpuMeasureBarrier, OthersMeasuringUntilTheLastFinishes) {
  SchedulerServer server(socket_path("finish"), options(Policy::best_effort, 2), 2);
  auto a = connect_gate(server.path(), kTimeout), b = connect_gate(server.path(), kTimeout);
  std::jthread other([&] { b->begin_measuring(); });
  a->begin_measuring();
  other.join();
  EXPECT_TRUE(a->others_measuring());   // b has not finished
  EXPECT_TRUE(a->others_measuring());   // asking again changes nothing
  EXPECT_FALSE(b->others_measuring());  // b is the last to finish
  EXPECT_FALSE(a->others_measuring());
}

TEST(VgpuMeasureBarrier, AVmThatPowersOffFirstFailsTheOthersAtOnce) {
  SchedulerServer server(socket_path("left"), options(Policy::best_effort, 2), 2);
  auto a = connect_gate(server.path(), kTimeout);
  Failure waited{};
  std::jthread waiter([&] { waited = failure_of([&] { a->begin_measuring(); }, "released"); });
  std::this_thread::sleep_for(100ms);
  connect_gate(server.path(), kTimeout).reset();  // a second VM connects and powers off
  waiter.join();
  EXPECT_TRUE(contains(waited.error, "powered off before its measured steps")) << waited.error;
  EXPECT_LT(waited.took, secs(kTimeout)) << waited.error;
}

TEST(VgpuMeasureBarrier, AVmAloneWaitsForTheOthersOnlyUntilItsTimeout) {
  SchedulerServer server(socket_path("alone"), options(Policy::best_effort, 2), 2);
  auto a = connect_gate(server.path(), 300ms);
  try {
    a->begin_measuring();
    FAIL() << "released without the second VM";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "only 1 of 2 VMs reached their measured steps within 300 ms")) << e.what();
  }
}

TEST(VgpuMeasureBarrier, WithoutMeasuringVmsNobodyWaits) {
  SchedulerServer server(socket_path("nobar"), options(Policy::best_effort, 2));
  auto a = connect_gate(server.path(), kTimeout);
  a->begin_measuring();
  EXPECT_FALSE(a->others_measuring());
  SliceScheduler local_sched(options(Policy::best_effort, 1));
  auto local = make_local_gate(local_sched, local_sched.power_on(), kTimeout);
  local->begin_measuring();
  EXPECT_FALSE(local->others_measuring());
}

}  // namespace
}  // namespace ringbench::vgpu
