// `ringbench allreduce` (and allgather, reducescatter, broadcast, alltoall: every registered
// Collective): an nccl-tests style sweep of one implementation over message sizes, with `#`
// metadata, one row per size (out-of-place and in-place), JSON beside it, and a nonzero exit
// code when any element is wrong.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runner/backends/backend.h"

namespace ringbench {

struct AllreduceArgs {
  const Collective* collective = nullptr;  // the command's
  std::string minbytes = "4K", maxbytes = "64M";
  double factor = 2;
  int iters = 20, warmup = 5, check = 1;
  std::string impl = "ring", transport = kBaselineBackend, dtype = "float", op = "sum";
  std::string json;
  double timeout_s = 30;
  int ranks = 1;
  std::string iface, addr;
  std::string secret_file;  // --secret-file: the job's secret, for ranks started by hand
  int sockets_per_peer = 2;
  std::string segment = "1M", min_segment = "64K", socket_buffer = "0";
  std::string algo = "auto", direct_max = "32K";
  std::string algo_table;  // --algo auto: the cost table `predict --algo-table` wrote ("": the built-in rule)
  int depth = 4;
  int spin_us = 200;
  bool hierarchical = false;  // allreduce in two levels: shm within each node, --transport across
  int ranks_per_node = 1;     // the nodes: consecutive ranks, this many each
  std::string hier_chunk = "4M";  // --hierarchical: the levels' pipeline chunk ("0": one after the other)
};

// `argv` is the full command line, for re-executing local ranks and for the metadata.
int run_collective_sweep(const AllreduceArgs& a, const std::vector<std::string>& argv);

}  // namespace ringbench
