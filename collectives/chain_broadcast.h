// Broadcast from rank 0 down the chain 0 -> 1 -> ... -> n-1, pipelined: each rank passes every
// segment on as soon as it has arrived, so a long message takes about one transfer's time plus
// n-2 segments', and every link carries it once (busbw = algbw, as nccl-tests counts it; NCCL's
// ring broadcast is the same chain).
#pragma once

#include <cstddef>

#include "collectives/block_buffers.h"
#include "collectives/dtype.h"
#include "collectives/ring_allreduce.h"

namespace ringbench {

class ChainBroadcast {
 public:
  // Rank 0 sends `in` (out of place, and copies it to `out`) or `out` (in place); every other
  // rank receives into `out`. Both hold max_count elements.
  ChainBroadcast(Transport& t, const void* in, void* out, size_t max_count, DType dtype, RingOptions opts = {});
  void run(size_t count);

 private:
  void run_chain(size_t count, uint64_t tag);
  Transport& t_;
  size_t max_count_;
  DType dtype_;
  RingOptions opts_;
  BlockBuffers bufs_;
  uint64_t runs_ = 0;
};

}  // namespace ringbench
