// Gradient reducers for GPU backends, whose gradients are device memory. Only with
// RINGBENCH_HAVE_CUDA (the NCCL one with RINGBENCH_HAVE_NCCL); no CUDA types here.
#pragma once

#include <cstddef>
#include <memory>

#include "models/trainer.h"
#include "ringbench/config.h"

namespace ringbench {
class NcclComm;
}

namespace ringbench::models {

// A host reducer (our ring over a transport that moves host memory, or MPI_Allreduce) on
// device gradients: each bucket is staged through a pinned host mirror of the gradient buffer,
// which `host` makes its reducer over (registration happens there, once), with the copies
// pipelined against the reduction in pieces of `piece_bytes` (0: whole buckets); see
// collectives/staged_allreduce.h.
std::unique_ptr<GradientReducer> make_staged_reducer(float* device_grads, size_t count,
                                                     const ReducerFactory& host,
                                                     size_t piece_bytes = size_t(4) << 20);

#if RINGBENCH_HAVE_NCCL
// ncclAllReduce (sum, then a division by the world size) on the device gradients, on a stream of
// its own; `comm` (made at setup, on the trainer's device) must outlive the reducer. Every wait
// is bounded by the communicator's timeout.
std::unique_ptr<GradientReducer> make_nccl_reducer(NcclComm& comm, float* device_grads, size_t count);
#endif

}  // namespace ringbench::models
