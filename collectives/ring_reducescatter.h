// Ring reduce-scatter: the allreduce's first half. Block c's partial sum travels the ring
// rank -> rank+1, each rank adding its own block c, until it reaches rank c finished after n-1
// steps. The partial sums a rank passes on are kept in a scratch of n-2 blocks (the input is
// never written, out of place); received segments land in a few slots and are added from there.
#pragma once

#include <cstddef>

#include "collectives/block_buffers.h"
#include "collectives/dtype.h"
#include "collectives/ring_allreduce.h"

namespace ringbench {

class RingReduceScatter {
 public:
  // `in`: n x max_block elements; `out`: max_block. In place (in == out), the result is written
  // at out + rank x block, as NCCL's in-place reduce-scatter does.
  RingReduceScatter(Transport& t, const void* in, void* out, size_t max_block, DType dtype, ReduceOp op,
                    RingOptions opts = {});
  // Reduces block `rank` of every rank's input of n x `block` elements into this rank's output.
  void run(size_t block);
  // What one set up for blocks of up to `max_block` elements allocates beside its buffers: the
  // partial sums it passes on (n-2 blocks) and the receive slots.
  static size_t scratch_bytes(size_t max_block, size_t esize, int ranks, const RingOptions& opts);

 private:
  void run_ring(size_t block, uint64_t tag);
  Transport& t_;
  size_t max_block_;
  DType dtype_;
  ReduceOp op_;
  RingOptions opts_;
  size_t slot_elems_;
  BlockBuffers bufs_;
  uint64_t runs_ = 0;
};

}  // namespace ringbench
