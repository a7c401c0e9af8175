// Wall-time shares of the emulated vGPU scheduler: threads as VMs, always busy with 200 us
// device ops and a checkpoint after each, over in-process gates, for 1 s windows. Counters:
// share_vmK (the scheduler's held time of VM K over the window) and total. The exact shares
// of each policy are checked in simulated time by tests/vgpu_policy_test; this shows what
// threads on this host really get (late wake-ups and overruns move it, on a loaded host by
// tens of points).
#include <benchmark/benchmark.h>

#include <string>
#include <thread>
#include <vector>

#include "vgpu/scheduler.h"

namespace {

using namespace std::chrono_literals;
using ringbench::vgpu::Clock;
using ringbench::vgpu::Policy;

void share(benchmark::State& state, Policy policy, int max_instances, int busy, int idle) {
  for (auto _ : state) {
    ringbench::vgpu::SchedulerOptions o;
    o.policy = policy;
    o.max_instances = max_instances;
    ringbench::vgpu::SliceScheduler s(o);
    std::vector<int> vms;
    for (int i = 0; i < busy + idle; ++i) vms.push_back(s.power_on());
    const auto begin = Clock::now() + 20ms, end = begin + 1s;  // the threads start meanwhile
    std::vector<std::jthread> threads;
    for (int i = 0; i < busy; ++i) {
      threads.emplace_back([&s, vm = vms[i], begin, end] {
        auto gate = ringbench::vgpu::make_local_gate(s, vm, 10s);
        std::this_thread::sleep_until(begin);
        gate->enter();
        while (Clock::now() < end) {
          std::this_thread::sleep_for(200us);  // the device op; sleeping, as a host waits on a kernel
          gate->checkpoint();
        }
        gate->leave();
      });
    }
    threads.clear();  // joins
    const double window = std::chrono::duration<double>(end - begin).count();
    for (size_t i = 0; i < vms.size(); ++i) {
      state.counters["share_vm" + std::to_string(i)] = s.busy_seconds(vms[i], begin, end) / window;
    }
    state.counters["total"] = s.busy_seconds(begin, end) / window;
  }
}

}  // namespace

// Expected: 0.25; 1.0 (the idle VM 0); 0.5 each; 0.5 (the idle VM takes its half); 1/3 each.
BENCHMARK_CAPTURE(share, fixed_share_1_of_4, Policy::fixed_share, 4, 1, 0)->Iterations(1)->Repetitions(3)->UseRealTime();
BENCHMARK_CAPTURE(share, best_effort_1_busy_1_idle, Policy::best_effort, 4, 1, 1)->Iterations(1)->Repetitions(3)->UseRealTime();
BENCHMARK_CAPTURE(share, best_effort_2_busy, Policy::best_effort, 4, 2, 0)->Iterations(1)->Repetitions(3)->UseRealTime();
BENCHMARK_CAPTURE(share, equal_share_1_busy_1_idle, Policy::equal_share, 4, 1, 1)->Iterations(1)->Repetitions(3)->UseRealTime();
BENCHMARK_CAPTURE(share, equal_share_3_busy, Policy::equal_share, 4, 3, 0)->Iterations(1)->Repetitions(3)->UseRealTime();

BENCHMARK_MAIN();
