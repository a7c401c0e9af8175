// Ring allgather: each rank's block goes round the ring rank -> rank+1 in n-1 steps, every
// block cut into segments that are forwarded as they arrive (the allreduce's second half, as
// NCCL's ring allgather). Out of place, the rank's own block is copied into its place first.
#pragma once

#include <cstddef>

#include "collectives/block_buffers.h"
#include "collectives/dtype.h"
#include "collectives/ring_allreduce.h"

namespace ringbench {

class RingAllgather {
 public:
  // `in`: max_block elements; `out`: n x max_block. In place (in == out), this rank's block is
  // already at out + rank x block.
  RingAllgather(Transport& t, const void* in, void* out, size_t max_block, DType dtype, RingOptions opts = {});
  // Gathers every rank's `block` elements into out, in rank order.
  void run(size_t block);

 private:
  void run_ring(size_t block, uint64_t tag);
  Transport& t_;
  size_t max_block_;
  DType dtype_;
  RingOptions opts_;
  BlockBuffers bufs_;
  uint64_t runs_ = 0;
};

// Segments for a ring step of `elems` elements: about a quarter of it, within the options' bounds.
size_t ring_segment_elems(size_t elems, size_t esize, const RingOptions& o);

}  // namespace ringbench
