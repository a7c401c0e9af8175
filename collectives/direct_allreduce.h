// One-shot allreduce for small messages: every rank sends its whole input to every other rank
// over the full mesh, then reduces the n inputs locally in rank order. One network latency
// instead of the ring's 2(n-1), at the price of (n-1)x the data per rank — the right trade
// below a few tens of KiB. The rank order makes every rank's result bit-identical.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "collectives/dtype.h"
#include "collectives/transport.h"

namespace ringbench {

class DirectAllreduce {
 public:
  DirectAllreduce(Transport& t, const void* in, void* out, size_t max_count, DType dtype,
                  ReduceOp op, std::chrono::milliseconds timeout);
  void run(size_t count);

 private:
  void run_direct(size_t count, uint64_t tag);
  Transport& t_;
  const void* in_;
  void* out_;
  size_t max_count_;
  DType dtype_;
  ReduceOp op_;
  std::chrono::milliseconds timeout_;
  size_t esize_;
  std::vector<char> scratch_;  // one slot per rank: peers' inputs, and ours when in-place
  std::unique_ptr<Buffer> in_buf_, scratch_buf_;
  uint64_t runs_ = 0;
};

}  // namespace ringbench
