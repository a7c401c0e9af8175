// The allreduce a benchmark or the training loop calls: the ring, or for small messages
// recursive doubling (power-of-two rank counts) or the one-shot direct algorithm, chosen per
// call by size (as MPI and NCCL switch algorithms); or halving-doubling (hd) at every size when
// asked; or, given a cost table (`--algo auto --algo-table FILE`, written by `ringbench predict`
// from measured α-β fits, NCCL's tuner idea), whichever algorithm the table names for the size.
// run() says which one ran.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "collectives/direct_allreduce.h"
#include "collectives/hd_allreduce.h"
#include "collectives/ring_allreduce.h"

namespace ringbench {

enum class AllreduceAlgo { automatic, ring, direct, rd, hd };

// One size range of a cost table: messages above the previous range's max_bytes and up to this
// one's (inclusive) run `algo` (ring, direct, rd or hd). The last range ends at SIZE_MAX.
struct AlgoRange {
  size_t max_bytes = SIZE_MAX;
  AllreduceAlgo algo = AllreduceAlgo::ring;
};

struct AllreduceOptions {
  RingOptions ring;
  AllreduceAlgo algo = AllreduceAlgo::automatic;
  size_t direct_max_bytes = 32 << 10;  // automatic, no table: rd or direct up to this size, ring above
  std::vector<AlgoRange> table;         // automatic: when not empty, the choice by size (the built-in rule's instead)
};

AllreduceAlgo parse_algo(const std::string& s);  // "auto", "ring", "direct", "rd", "hd"
const char* algo_name(AllreduceAlgo a);

class Allreduce {
 public:
  // Sets up only the algorithms that can run: a table's, or the rule's. Error for a table that
  // is not ascending, does not end at SIZE_MAX, names `automatic`, or rd on a rank count that is
  // not a power of two.
  Allreduce(Transport& t, const void* in, void* out, size_t max_count, DType dtype, ReduceOp op,
            const AllreduceOptions& opts = {});
  // Allreduces elements [offset, offset + count) of the buffers. Every rank must pass the same
  // count (and so end up in the same algorithm). Returns the name of the algorithm that ran:
  // "ring", "direct", "rd" or "hd".
  const char* run(size_t count, size_t offset = 0);
  // The algorithm run(count) runs.
  AllreduceAlgo chosen(size_t count) const;
  // The bytes one allreduce set up for `max_count` elements of `esize` bytes over `ranks` ranks
  // allocates beside its input and output (the copies of peers' data of the algorithms it sets
  // up, the ring's receive slots): what the memory pre-check counts.
  static size_t scratch_bytes(size_t max_count, size_t esize, int ranks, const AllreduceOptions& opts);

 private:
  std::optional<size_t> largest_bytes(AllreduceAlgo a, size_t max_bytes) const;
  AllreduceOptions opts_;
  size_t esize_;
  int n_;
  std::vector<AlgoRange> ranges_;  // automatic's choice by size: the table's, or the built-in rule's
  std::unique_ptr<RingAllreduce> ring_;
  std::unique_ptr<DirectAllreduce> direct_, rd_;  // small messages: copies of peers' inputs
  std::unique_ptr<HdAllreduce> hd_;               // halving-doubling
};

}  // namespace ringbench
