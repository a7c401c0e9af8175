// The allreduce a benchmark or the training loop calls: the ring, or the one-shot direct
// algorithm for small messages, chosen per call by size (as MPI and NCCL switch algorithms).
// run() returns which one ran, so results can say so.
#pragma once

#include "collectives/direct_allreduce.h"
#include "collectives/ring_allreduce.h"

namespace ringbench {

enum class AllreduceAlgo { automatic, ring, direct };

struct AllreduceOptions {
  RingOptions ring;
  AllreduceAlgo algo = AllreduceAlgo::automatic;
  size_t direct_max_bytes = 32 << 10;  // automatic: direct up to this many bytes, ring above
};

AllreduceAlgo parse_algo(const std::string& s);  // "auto", "ring", "direct"
const char* algo_name(AllreduceAlgo a);

class Allreduce {
 public:
  Allreduce(Transport& t, const void* in, void* out, size_t max_count, DType dtype, ReduceOp op,
            const AllreduceOptions& opts = {});
  // Every rank must pass the same count (and so end up in the same algorithm).
  AllreduceAlgo run(size_t count);

 private:
  AllreduceAlgo choose(size_t count) const;
  AllreduceOptions opts_;
  size_t esize_;
  std::unique_ptr<RingAllreduce> ring_;
  std::unique_ptr<DirectAllreduce> direct_;
};

}  // namespace ringbench
