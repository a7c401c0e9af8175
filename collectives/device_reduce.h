// Element-wise kernels on CUDA device buffers for the collectives (the averaging step of an
// allreduce that sums first). Same rounding as collectives/reduce.h's divide(): widen to float,
// IEEE division, round to nearest even; so results checked against verify.h match bit for bit.
// Only with RINGBENCH_HAVE_CUDA.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "collectives/dtype.h"

namespace ringbench {

// data[i] = data[i] / divisor for i < count, queued on `stream` (nothing when count is 0).
void divide_on_device(DType t, void* data, size_t count, float divisor, cudaStream_t stream);

}  // namespace ringbench
