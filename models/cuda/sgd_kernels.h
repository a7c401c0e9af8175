// SGD with momentum and weight decay on device buffers: exactly models/sgd.h's update, bit for
// bit (each multiply and add rounded on its own, never fused into an FMA, as the CPU loop does):
//   v = momentum * v + (grad + wd * param);   param -= lr * v
// where wd is the weight decay of the element's tensor (0 for tensors without decay).
// Only with RINGBENCH_HAVE_CUDA.
#pragma once

#ifdef RINGBENCH_CUDA_EMULATION
#include "cuda/emulation.h"
#else
#include <cuda_runtime.h>
#endif

#include <cstddef>

namespace ringbench::models::cuda_kernels {

struct SgdTensors {
  const size_t* begin = nullptr;  // device: the first element of each tensor, then the end (T+1)
  const float* decay = nullptr;   // device: each tensor's weight decay (T)
};

// Updates tensors [first, last], i.e. elements [begin[first], begin[last + 1]), on `stream`.
void sgd_update(float* params, const float* grads, float* velocity, const SgdTensors& tensors,
                int first, int last, size_t begin, size_t end, float lr, float momentum,
                cudaStream_t stream);

// Dynamic loss scaling (TrainBuffers::unscale_if_finite), on `stream`: sets *flag (device) to 1
// if any of g[0, n) is inf or NaN (never to 0: the caller clears it first); multiplies g[0, n)
// by `factor`.
void flag_nonfinite(const float* g, size_t n, int* flag, cudaStream_t stream);
void scale(float* g, size_t n, float factor, cudaStream_t stream);

}  // namespace ringbench::models::cuda_kernels
