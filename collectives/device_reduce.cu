#include "collectives/device_reduce.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/check.h"

namespace ringbench {
namespace {

__device__ inline float widen(float v) { return v; }
__device__ inline float widen(__half v) { return __half2float(v); }
__device__ inline float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T>
__device__ inline T narrow(float v);
template <>
__device__ inline float narrow<float>(float v) { return v; }
template <>
__device__ inline __half narrow<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ inline __nv_bfloat16 narrow<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <class T>
__global__ void divide_kernel(T* data, size_t count, float divisor) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    data[i] = narrow<T>(__fdiv_rn(widen(data[i]), divisor));
}

template <class T>
void launch(void* data, size_t count, float divisor, cudaStream_t stream) {
  constexpr unsigned threads = 256;
  const size_t blocks = std::min<size_t>((count + threads - 1) / threads, 4096);
  divide_kernel<T><<<unsigned(blocks), threads, 0, stream>>>(static_cast<T*>(data), count, divisor);
  RB_CUDA(cudaGetLastError());
}

}  // namespace

void divide_on_device(DType t, void* data, size_t count, float divisor, cudaStream_t stream) {
  if (!count) return;
  switch (t) {
    case DType::f32: return launch<float>(data, count, divisor, stream);
    case DType::f16: return launch<__half>(data, count, divisor, stream);
    case DType::bf16: return launch<__nv_bfloat16>(data, count, divisor, stream);
  }
}

}  // namespace ringbench
