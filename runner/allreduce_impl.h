// One small hook per benchmarked allreduce implementation (as nccl-tests has one file per
// collective): set up once for the largest size, then run(count, inplace) is all that is timed.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "collectives/dtype.h"
#include "collectives/allreduce.h"
#include "collectives/store.h"
#include "collectives/transport.h"

namespace ringbench {

class AllreduceImpl {
 public:
  virtual ~AllreduceImpl() = default;
  // Out-of-place reduces `in` into `out`; in-place reduces `out` into itself; elements
  // [offset, offset + count). Returns the algorithm that ran ("ring", "direct", "mpi").
  virtual const char* run(size_t count, bool inplace, size_t offset = 0) = 0;
  // Implementations on device buffers (nccl) copy elements [0, count) of the host input (the
  // host `out` when in place) to the device before a checked run, and the result back after
  // it; the timed runs work on whatever the device holds. Host implementations need neither.
  virtual void load_input(size_t /*count*/, bool /*inplace*/) {}
  virtual void fetch_result(size_t /*count*/) {}
};

std::unique_ptr<AllreduceImpl> make_ring_impl(Transport& t, const void* in, void* out,
                                              size_t max_count, DType dtype, ReduceOp op,
                                              const AllreduceOptions& opts);
// MPI_Allreduce on MPI_COMM_WORLD; float32 only (MPI has no half types); avg is MPI_SUM then a
// division. A watchdog aborts the job if one call takes longer than `timeout`.
// ncclAllReduce on device buffers of `max_count` elements on the current CUDA device, the
// communicator bootstrapped through `store` (rank 0 publishes NCCL's unique id); `in` and `out`
// are the host buffers that load_input / fetch_result copy from and to. avg is a sum then a
// division on the device (exact, as the check wants). Every wait is bounded by `timeout` (the
// communicator is aborted past it). Fills `path` with the NCCL path for the metadata. Without
// NCCL or a GPU: Error with the reason.
std::unique_ptr<AllreduceImpl> make_nccl_impl(Store& store, int rank, int n, const void* in, void* out,
                                              size_t max_count, DType dtype, ReduceOp op,
                                              std::chrono::milliseconds timeout,
                                              std::map<std::string, std::string>* path);
std::unique_ptr<AllreduceImpl> make_mpi_impl(const void* in, void* out, size_t max_count,
                                             DType dtype, ReduceOp op,
                                             std::chrono::milliseconds timeout);

}  // namespace ringbench
