// Hierarchical allreduce for several ranks per node (Horovod's --hierarchical-allreduce, NCCL's
// and Gloo's reduce-within-the-node-first): a ring reduce-scatter among the node's ranks over a
// fast intra-node transport (shared memory), then an allreduce of each rank's finished share
// across the nodes, one ring per local rank over the network, then a ring allgather within the
// node. Each node link carries 2(M-1)/M of the data for M nodes instead of the flat ring's
// 2(N-1)/N for N = L x M ranks, and the L cross-node rings run side by side.
//
// Shares differ by at most one element (uneven counts), and every step sends a message even
// when empty, so ranks disagreeing on the count fail the tag check as the flat ring's do.
#pragma once

#include <cstddef>
#include <memory>

#include "collectives/allreduce.h"
#include "collectives/block_buffers.h"

namespace ringbench {

class HierarchicalAllreduce {
 public:
  // `intra`: this node's L ranks (local rank = intra.rank()); `inter`: the M ranks, one per node,
  // that have this rank's local rank (node = inter.rank()). Buffers of max_count elements;
  // in == out is in place. `opts` shape both levels (the cross-node allreduce picks its
  // algorithm per share size as Allreduce does).
  HierarchicalAllreduce(Transport& intra, Transport& inter, const void* in, void* out, size_t max_count, DType dtype,
                        ReduceOp op, const AllreduceOptions& opts = {});
  // Allreduces elements [offset, offset + count). Returns "hier".
  const char* run(size_t count, size_t offset = 0);

 private:
  Span share(size_t count, int c) const;  // local rank c-1's share after the reduce-scatter
  void reduce_scatter(size_t count, size_t offset, uint64_t tag);
  void allgather(size_t count, size_t offset, uint64_t tag);
  void run_levels(size_t count, size_t offset);

  Transport &intra_, &inter_;
  DType dtype_;
  ReduceOp op_;
  RingOptions opts_;
  size_t max_count_, slot_elems_;
  BlockBuffers bufs_;             // registered with intra: in, out, receive slots
  Allreduce across_;              // sums a share across the nodes, in place in out
  uint64_t runs_ = 0;
};

}  // namespace ringbench
