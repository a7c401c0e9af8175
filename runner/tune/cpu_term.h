// tune's CPU term (issue 40): the CPU a rank's communication takes from its compute. Where a
// node's compute threads and communication threads outnumber its cores (sweeps give each rank
// as many compute threads as its node has cores, so on CPU training they nearly always do), every
// CPU second the allreduce spends (copies, reductions, the TCP stack, spinning) is a second the
// compute threads do not get: the step can be no shorter than
//     compute + optimizer + cpu_s_per_byte x bytes on the wire per step,
// however well the transfer hides behind backward. The α-β model prices the link; this prices the
// core. tune's step is the slower of the two.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringbench::report {
struct Run;
}

namespace ringbench::tune {

struct CpuTerm {
  double cpu_s_per_byte = 0;  // a rank's CPU seconds per byte of the allreduced buffer (0: none measured)
  int fitted_sizes = 0;       // probe sizes the value was fitted on
  double min_bytes = 0, max_bytes = 0;
  int cores = 0;            // CPUs one node's ranks may run on
  int compute_threads = 0;  // the node's ranks' compute threads
  int comm_threads = 0;     // the node's ranks' communication threads
  bool competes() const { return cpu_s_per_byte > 0 && compute_threads + comm_threads > cores; }
  double charge_s(double wire_bytes) const { return competes() ? cpu_s_per_byte * wire_bytes : 0; }
  nlohmann::json to_json() const;
};

// The least-squares slope of a rank's CPU seconds over the buffer's bytes, from the probe's sizes
// of at least 1M (smaller ones are per-call overhead, which the slope leaves in its intercept);
// with one such size, its ratio. Clamped at 0. `samples`: (bytes, CPU seconds per allreduce).
double fit_cpu_per_byte(const std::vector<std::pair<double, double>>& samples, int* used = nullptr);

// The probe run's (bytes, CPU seconds) for the ring allreduce on `transport` at `nodes` ranks:
// the rows' cpu_us (each the ranks' mean), the median over repeats. Empty where the rows have none
// (a probe from before the term).
std::vector<std::pair<double, double>> cpu_samples(const report::Run& probe, const std::string& transport, int nodes);

// The communication threads a training rank runs: the trainer's communication thread, and the
// transport's I/O (tcp) or progress (verbs) thread.
int comm_threads_per_rank(const std::string& transport);

// The term from (bytes, CPU seconds per allreduce) samples, with a node's cores and threads.
CpuTerm fit_cpu_term(const std::vector<std::pair<double, double>>& samples, int cores, int compute_threads,
                     int comm_threads);

// A training job's own node (`train --autotune`): each rank's host, CPUs (its affinity) and
// compute threads, in rank order. The ranks whose CPUs overlap on one host share those cores;
// the node is the group whose threads most outnumber its cores, so every rank picks the same.
struct RankCpus {
  std::string host;
  std::vector<int> cpus;
  int compute_threads = 1;  // 0 where a device computes
};
void set_busiest_node(CpuTerm& t, const std::vector<RankCpus>& ranks, int comm_threads_per_rank);

// The term for one (transport, N) of the probe, with the node's cores and threads.
CpuTerm cpu_term(const report::Run& probe, const std::string& transport, int nodes, int cores_per_node,
                 int ranks_per_node);

// One line for tune's output: the measured value and whether it is charged, and why.
std::string describe(const CpuTerm& t);

}  // namespace ringbench::tune
