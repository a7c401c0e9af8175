// One row of `ringbench allreduce` (nccl-tests style): what each rank measured for one
// (size, in-place) point, as it travels through the store to rank 0, and the row rank 0 makes
// of all of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringbench {

struct Measured {
  uint64_t wrong = 0;
  std::vector<double> us;  // per timed iteration
  // This rank's process CPU time (every thread, user and system: the copies, the reductions, the
  // TCP stack's work done in its calls, any spinning) per timed iteration, mean over them. tune
  // fits its CPU cost per byte from it.
  double cpu_us = 0;
};

std::string pack(const Measured& m);
// A rank's measurement as read back from the store, checked before use since whatever is in
// the store came over the network: exactly `iters` timings and a CPU time, each a duration, and
// at most `count` wrong elements. A bad value is an Error naming `key` and the rank that sent it.
Measured unpack(const std::string& s, const std::string& key, int sender, int iters, size_t count);

struct Row {
  double time_us, p50_us, p99_us, algbw, busbw;
  uint64_t wrong;
  double cpu_us;  // the ranks' mean CPU time per iteration (Measured::cpu_us)
};

// Time is the slowest rank's: the largest per-rank mean; p50/p99 are over iterations of the
// per-iteration maximum across ranks; busbw is algbw × `busbw_factor` (the collective's). Every
// rank has the same number of timings (unpack).
Row summarize(const std::vector<Measured>& ranks, size_t bytes, double busbw_factor);

}  // namespace ringbench
