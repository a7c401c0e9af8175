// Allreduce for small messages, where latency, not bandwidth, decides:
//  - one-shot: every rank sends its whole input to every other rank over the full mesh, then
//    reduces the n inputs locally in rank order. One network latency instead of the ring's
//    2(n-1), at the price of (n-1)x the data per rank.
//  - recursive doubling (power-of-two rank counts): log2(n) rounds of pairwise exchange and
//    add — fewer messages than one-shot (log2 n instead of n-1 per rank) for one more round.
// Both give every rank a bit-identical result (rank order; commutative pairwise adds).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "collectives/dtype.h"
#include "collectives/transport.h"

namespace ringbench {

class DirectAllreduce {
 public:
  // recursive_doubling needs a power-of-two rank count (Error otherwise). Runs reduce at most
  // `max_count` elements, anywhere within the first `extent` (>= max_count; 0 = max_count)
  // elements of in/out.
  DirectAllreduce(Transport& t, const void* in, void* out, size_t max_count, DType dtype,
                  ReduceOp op, std::chrono::milliseconds timeout, bool recursive_doubling,
                  size_t extent = 0);
  void run(size_t count, size_t offset = 0);
  const char* name() const { return rd_ ? "rd" : "direct"; }

 private:
  void run_direct(size_t count, size_t offset, uint64_t tag);
  void run_rd(size_t count, size_t offset, uint64_t tag);
  Transport& t_;
  const void* in_;
  void* out_;
  size_t max_count_, extent_;
  DType dtype_;
  ReduceOp op_;
  std::chrono::milliseconds timeout_;
  size_t esize_;
  bool rd_;
  std::vector<char> scratch_;  // one slot per rank: peers' inputs, and ours when in-place
  std::unique_ptr<Buffer> in_buf_, out_buf_, scratch_buf_;
  uint64_t runs_ = 0;
};

}  // namespace ringbench
