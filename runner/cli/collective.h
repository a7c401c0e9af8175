// A benchmarked collective, nccl-tests style: what `ringbench allreduce`'s sweep needs to know
// about the operation it times, in one small descriptor — its name, the test data (values
// unique per (rank, index), so a misrouted chunk is caught), the exact check of a result, the
// bus-bandwidth factor (busbw = algbw × factor, as nccl-tests' PERFORMANCE.md defines it), and
// how a communicator sets it up. The sweep itself (sizes, timing, rows, JSON) is shared; a new
// collective is a descriptor and its Communicator hook.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "collectives/allreduce.h"
#include "collectives/dtype.h"
#include "runner/backends/backend.h"

namespace ringbench {

struct Collective {
  std::string name;
  double (*busbw_factor)(int ranks);
  // This rank's input of `count` elements.
  void (*fill)(DType dtype, void* data, size_t count, int rank, int ranks);
  // Elements of this rank's result that are not exactly what they must be.
  uint64_t (*check)(DType dtype, const void* result, size_t count, int ranks, ReduceOp op);
  // Set up once for the largest count; only the plan's run() is timed.
  std::unique_ptr<AllreducePlan> (*plan)(Communicator& comm, const void* in, void* out, size_t max_count,
                                         DType dtype, ReduceOp op, const AllreduceOptions& ring);
};

const Collective& allreduce_collective();

}  // namespace ringbench
