// Alltoall over the full mesh, the direct algorithm: every rank posts a receive for each peer's
// block straight into its place in the output, then all its sends at once, block p to rank p,
// starting with the rank after itself so that no two ranks start on the same peer; its own block
// is a local copy. (Not the pairwise algorithm, which exchanges with one peer per step.) In
// place, the n-1 blocks it sends are copied aside first, as MPI_IN_PLACE needs (its own block
// stays where it is).
#pragma once

#include <algorithm>
#include <cstddef>

#include "collectives/block_buffers.h"
#include "collectives/dtype.h"
#include "collectives/ring_allreduce.h"

namespace ringbench {

class DirectAlltoall {
 public:
  // `in` and `out`: n x max_block elements each; block p of `in` goes to rank p, block p of
  // `out` comes from rank p.
  DirectAlltoall(Transport& t, const void* in, void* out, size_t max_block, DType dtype, RingOptions opts = {});
  void run(size_t block);
  // What one set up for blocks of up to `max_block` elements allocates beside its buffers: in
  // place, a copy of the n-1 blocks it sends (out of place, nothing).
  static size_t scratch_bytes(size_t max_block, size_t esize, int ranks, bool inplace) {
    return inplace && ranks > 1 ? std::max<size_t>(max_block * static_cast<size_t>(ranks - 1), 1) * esize : 0;
  }

 private:
  void exchange(size_t block, uint64_t tag);
  Transport& t_;
  size_t max_block_;
  DType dtype_;
  RingOptions opts_;
  BlockBuffers bufs_;
  uint64_t runs_ = 0;
};

}  // namespace ringbench
