// Division by a divisor fixed before a launch, by a multiply-high and a shift (Granlund and
// Montgomery's method, as CUTLASS's FastDivmod): exact for numerators and divisors below 2^31.
// An integer division is tens of instructions on a GPU; per element, in a memory-bound kernel,
// it can cost more than the memory traffic. Build on the host, pass by value to the kernel.
#pragma once

#include <cstdint>

#ifdef RINGBENCH_CUDA_EMULATION
#include "cuda/emulation.h"
#else
#include <cuda_runtime.h>
#endif

namespace ringbench::cuda {

struct FastDiv {
  uint32_t d = 1, mul = 0, shift = 0;

  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    if (d <= 1) return;
    uint32_t log2 = 0;  // ceil(log2(d))
    while ((uint64_t(1) << log2) < d) ++log2;
    const uint32_t p = 31 + log2;
    mul = uint32_t(((uint64_t(1) << p) + d - 1) / d);
    shift = p - 32;
  }

  __host__ __device__ uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__) || defined(RINGBENCH_CUDA_EMULATION)
    return d == 1 ? n : __umulhi(n, mul) >> shift;
#else
    return n / d;
#endif
  }
  __host__ __device__ uint32_t mod(uint32_t n) const { return n - div(n) * d; }
};

}  // namespace ringbench::cuda
