// Halving-doubling allreduce (Rabenseifner; MPICH's and Gloo's for mid-sized messages): a
// reduce-scatter by recursive halving — log2(p) rounds, each exchanging half of what is left
// with the partner at distance p/2, p/4, ... and adding it in — then an allgather by recursive
// doubling that retraces the rounds. 2·log2(p) latencies instead of the ring's 2(n-1), for the
// same 2(p-1)/p of the data per rank.
//
// Ranks that are not a power of two are handled as MPICH and Rabenseifner do: with
// p = 2^floor(log2 n) and rem = n - p, each even rank below 2·rem first hands its whole input to
// the odd rank above it and waits; the odd one adds it in and takes part in the p-rank
// algorithm; at the end it hands the result back. All ranks end bit-identical.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

#include "collectives/block_buffers.h"
#include "collectives/dtype.h"
#include "collectives/transport.h"

namespace ringbench {

class HdAllreduce {
 public:
  // `in` and `out` hold `max_count` elements each; in == out is in place.
  HdAllreduce(Transport& t, const void* in, void* out, size_t max_count, DType dtype, ReduceOp op,
              std::chrono::milliseconds timeout);
  // Allreduces elements [offset, offset + count).
  void run(size_t count, size_t offset = 0);
  // What one set up for `max_count` elements allocates beside its buffers (the constructor's scratch).
  static size_t scratch_bytes(size_t max_count, size_t esize, int ranks) {
    return ranks > 1 ? std::max<size_t>(max_count, 1) * esize : 0;
  }

 private:
  struct Pass;
  void run_hd(size_t count, size_t offset, uint64_t tag);
  Transport& t_;
  size_t max_count_;
  DType dtype_;
  ReduceOp op_;
  std::chrono::milliseconds timeout_;
  BlockBuffers bufs_;
  uint64_t runs_ = 0;
};

}  // namespace ringbench
