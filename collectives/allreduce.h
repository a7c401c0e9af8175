// The allreduce a benchmark or the training loop calls: the ring, or for small messages
// recursive doubling (power-of-two rank counts) or the one-shot direct algorithm, chosen per
// call by size (as MPI and NCCL switch algorithms); or halving-doubling (hd) at every size when
// asked. run() says which one ran.
#pragma once

#include "collectives/direct_allreduce.h"
#include "collectives/hd_allreduce.h"
#include "collectives/ring_allreduce.h"

namespace ringbench {

enum class AllreduceAlgo { automatic, ring, direct, rd, hd };

struct AllreduceOptions {
  RingOptions ring;
  AllreduceAlgo algo = AllreduceAlgo::automatic;
  size_t direct_max_bytes = 32 << 10;  // automatic: rd or direct up to this size, ring above
};

AllreduceAlgo parse_algo(const std::string& s);  // "auto", "ring", "direct", "rd", "hd"
const char* algo_name(AllreduceAlgo a);

class Allreduce {
 public:
  Allreduce(Transport& t, const void* in, void* out, size_t max_count, DType dtype, ReduceOp op,
            const AllreduceOptions& opts = {});
  // Allreduces elements [offset, offset + count) of the buffers. Every rank must pass the same
  // count (and so end up in the same algorithm). Returns the name of the algorithm that ran:
  // "ring", "direct" or "rd".
  const char* run(size_t count, size_t offset = 0);

 private:
  bool small(size_t count) const;
  AllreduceOptions opts_;
  size_t esize_;
  std::unique_ptr<RingAllreduce> ring_;
  std::unique_ptr<DirectAllreduce> small_;  // direct or rd
  std::unique_ptr<HdAllreduce> hd_;         // --algo hd: halving-doubling at every size
};

}  // namespace ringbench
