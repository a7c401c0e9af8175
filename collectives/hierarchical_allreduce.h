// Hierarchical allreduce for several ranks per node (Horovod's --hierarchical-allreduce, NCCL's
// and Gloo's reduce-within-the-node-first): a ring reduce-scatter among the node's ranks over a
// fast intra-node transport (shared memory), then an allreduce of each rank's finished share
// across the nodes, one ring per local rank over the network, then a ring allgather within the
// node. Each node link carries 2(M-1)/M of the data for M nodes instead of the flat ring's
// 2(N-1)/N for N = L x M ranks, and the L cross-node rings run side by side.
//
// Shares differ by at most one element (uneven counts), and every step sends a message even
// when empty, so ranks disagreeing on the count fail the tag check as the flat ring's do.
//
// Pipelined (as NCCL's): a buffer of more than one chunk (`chunk_bytes`, whole elements) goes
// through the levels chunk by chunk, the level across the nodes on a thread of its own: while
// chunk k crosses the nodes, chunk k+1 is reduce-scattered and chunk k-1 allgathered within the
// node. The levels then cost about the slower of the two per chunk, plus one chunk's
// reduce-scatter to fill the pipeline and one chunk's allgather to drain it, instead of their
// sum. chunk_bytes 0: the three phases one after the other on the whole buffer.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "collectives/allreduce.h"
#include "collectives/block_buffers.h"

namespace ringbench {

class Error;

class HierarchicalAllreduce {
 public:
  // The default chunk: a few chunks at the training buckets' sizes (1-25 MiB), each large enough
  // that the level across the nodes runs at its bandwidth (docs/collectives.md).
  static constexpr size_t kDefaultChunkBytes = size_t{4} << 20;

  // `intra`: this node's L ranks (local rank = intra.rank()); `inter`: the M ranks, one per node,
  // that have this rank's local rank (node = inter.rank()). Buffers of max_count elements;
  // in == out is in place. `opts` shape both levels (the cross-node allreduce picks its
  // algorithm per share size as Allreduce does). `chunk_bytes`: the pipeline's chunk (0: not pipelined).
  HierarchicalAllreduce(Transport& intra, Transport& inter, const void* in, void* out, size_t max_count, DType dtype,
                        ReduceOp op, const AllreduceOptions& opts = {}, size_t chunk_bytes = kDefaultChunkBytes);
  // Allreduces elements [offset, offset + count). Returns "hier".
  const char* run(size_t count, size_t offset = 0);

 private:
  Span share(size_t count, int c) const;  // local rank c-1's share after the reduce-scatter
  void reduce_scatter(size_t count, size_t offset, uint64_t tag);
  void allgather(size_t count, size_t offset, uint64_t tag);
  void run_levels(size_t count, size_t offset);
  // One chunk's phases, each rethrowing a failure as its level's (both levels aborted).
  void scatter_level(size_t count, size_t offset, uint64_t tag, const std::string& what);
  void cross_level(size_t count, size_t offset, const std::string& what);
  void gather_level(size_t count, size_t offset, uint64_t tag, const std::string& what);
  [[noreturn]] void rethrow_within_node(const Error& e, const std::string& what);
  void run_pipelined(size_t count, size_t offset, uint64_t tag, const std::string& what);

  Transport &intra_, &inter_;
  DType dtype_;
  ReduceOp op_;
  RingOptions opts_;
  size_t max_count_, slot_elems_, chunk_elems_;  // chunk_elems_ 0: not pipelined
  BlockBuffers bufs_;             // registered with intra: in, out, receive slots
  Allreduce across_;              // sums a share across the nodes, in place in out
  uint64_t runs_ = 0;
};

}  // namespace ringbench
