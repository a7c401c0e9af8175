// One small hook per benchmarked allreduce implementation (as nccl-tests has one file per
// collective): set up once for the largest size, then run(count, inplace) is all that is timed.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "collectives/dtype.h"
#include "collectives/allreduce.h"
#include "collectives/transport.h"

namespace ringbench {

class AllreduceImpl {
 public:
  virtual ~AllreduceImpl() = default;
  // Out-of-place reduces `in` into `out`; in-place reduces `out` into itself; elements
  // [offset, offset + count). Returns the algorithm that ran ("ring", "direct", "mpi").
  virtual const char* run(size_t count, bool inplace, size_t offset = 0) = 0;
};

std::unique_ptr<AllreduceImpl> make_ring_impl(Transport& t, const void* in, void* out,
                                              size_t max_count, DType dtype, ReduceOp op,
                                              const AllreduceOptions& opts);
// MPI_Allreduce on MPI_COMM_WORLD; float32 only (MPI has no half types); avg is MPI_SUM then a
// division. A watchdog aborts the job if one call takes longer than `timeout`.
std::unique_ptr<AllreduceImpl> make_mpi_impl(const void* in, void* out, size_t max_count,
                                             DType dtype, ReduceOp op,
                                             std::chrono::milliseconds timeout);

}  // namespace ringbench
