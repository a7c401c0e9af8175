#include "models/cuda/sgd_kernels.h"

#include <algorithm>

#ifdef RINGBENCH_CUDA_EMULATION
#include "cuda/emulation.h"  // tests without a GPU: the kernel on host threads
#else
#include "cuda/check.h"
#define RB_LAUNCH(kernel, grid, block, stream) kernel<<<(grid), (block), 0, (stream)>>>
#endif

namespace ringbench::models::cuda_kernels {
namespace {

// One thread per element (grid-stride). A bucket holds a few to a few hundred tensors: the
// element's tensor, for its weight decay, is found by binary search in the small begin table.
__global__ void sgd_kernel(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ v,
                           const size_t* __restrict__ tbegin, const float* __restrict__ tdecay,
                           int first, int last, size_t begin, size_t end, float lr, float momentum) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = begin + size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < end; i += stride) {
    int lo = first, hi = last;  // the last tensor t with tbegin[t] <= i
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (tbegin[mid] <= i) lo = mid;
      else hi = mid - 1;
    }
    const float wd = tdecay[lo];
    const float wi = w[i];
    // sgd.cc: v = momentum * v + (dw + wd * w); w -= lr * v, every operation rounded alone.
    const float vi = __fadd_rn(__fmul_rn(momentum, v[i]), __fadd_rn(g[i], __fmul_rn(wd, wi)));
    v[i] = vi;
    w[i] = __fsub_rn(wi, __fmul_rn(lr, vi));
  }
}

// x - x is 0 for every finite x, NaN for inf and NaN (as the host's check in train_buffers.cc).
__global__ void flag_nonfinite_kernel(const float* g, size_t n, int* flag) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    if (!(__fsub_rn(g[i], g[i]) == 0.0f)) *flag = 1;  // every writer writes 1: no race on the value
}

__global__ void scale_kernel(float* g, size_t n, float factor) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) g[i] = __fmul_rn(g[i], factor);
}

unsigned blocks_for(size_t n, unsigned threads) { return unsigned(std::min<size_t>((n + threads - 1) / threads, 8192)); }

}  // namespace

void flag_nonfinite(const float* g, size_t n, int* flag, cudaStream_t stream) {
  if (n == 0) return;
  RB_LAUNCH(flag_nonfinite_kernel, blocks_for(n, 256), 256, stream)(g, n, flag);
  RB_CUDA(cudaGetLastError());
}

void scale(float* g, size_t n, float factor, cudaStream_t stream) {
  if (n == 0) return;
  RB_LAUNCH(scale_kernel, blocks_for(n, 256), 256, stream)(g, n, factor);
  RB_CUDA(cudaGetLastError());
}

void sgd_update(float* params, const float* grads, float* velocity, const SgdTensors& tensors,
                int first, int last, size_t begin, size_t end, float lr, float momentum,
                cudaStream_t stream) {
  if (end <= begin) return;
  constexpr unsigned threads = 256;
  const size_t blocks = std::min<size_t>((end - begin + threads - 1) / threads, 8192);
  RB_LAUNCH(sgd_kernel, unsigned(blocks), threads, stream)(params, grads, velocity, tensors.begin,
                                                          tensors.decay, first, last, begin, end, lr,
                                                          momentum);
  RB_CUDA(cudaGetLastError());
}

}  // namespace ringbench::models::cuda_kernels
