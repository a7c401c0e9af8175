// How many compute threads a training rank should use when the user did not say (--threads 0,
// the default): the CPUs this process may run on (sched_getaffinity), capped by its cgroup's CPU
// quota, less those other processes are keeping busy right now, split between this machine's
// ranks. On a shared server a worker thread that shares its core with a busy neighbour stalls
// its whole team at every barrier, so fewer threads on free cores are faster.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringbench {

struct CpuBudget {
  int allowed = 1;       // CPUs in this process's affinity mask
  double quota = 0;      // the cgroup's CPU quota in CPUs (0: none)
  int busy = 0;          // allowed CPUs that others kept at least half busy during the sample
  int ranks_here = 1;    // ranks sharing this machine
  int threads = 1;       // the choice: max(1, (min(allowed, quota) - busy) / ranks_here)
  // And weight gradients on a second thread when busy CPUs took some of this rank's share
  // (min(allowed, quota) / ranks_here) but not all CPUs: that thread takes what it gets of a
  // busy CPU, the others go on undisturbed on the free ones.
  bool weight_grad_thread = false;
  // Measured only (measure_cpu_budget): which allowed CPUs were busy and which free. With the
  // second thread, the rank computes on the free ones and that thread runs on the busy ones.
  std::vector<int> busy_cpus, free_cpus;

  std::string describe() const;  // "1 of 2 CPUs (1 busy with other work), 1 rank here"
  nlohmann::json to_json() const;
};

// The choice, from what was measured.
CpuBudget decide_cpu_budget(int allowed, double quota, int busy, int ranks_here);

// Samples /proc/stat for `sample_ms` (the only cost) and decides.
CpuBudget measure_cpu_budget(int ranks_here, int sample_ms = 150);

}  // namespace ringbench
