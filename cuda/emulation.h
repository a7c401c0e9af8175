// Runs our own CUDA kernels on the CPU, for tests on machines without a GPU: a .cu file compiled
// by the host compiler with RINGBENCH_CUDA_EMULATION defined includes this instead of the CUDA
// headers. Every block of a launch runs as blockDim.x host threads with a barrier for
// __syncthreads() (function-static "shared" memory: blocks run one after another), so the
// index math, grid-stride loops and block reductions execute as written. Only what our kernels
// use is here; device pointers are host pointers and streams are ignored (launches are
// synchronous). Not a model of the GPU's timing or memory model.
#pragma once

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/errors.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

using cudaStream_t = void*;
using cudaError_t = int;
constexpr cudaError_t cudaSuccess = 0;
inline cudaError_t cudaGetLastError() { return cudaSuccess; }

struct EmuDim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local EmuDim3 threadIdx, blockIdx, blockDim, gridDim;

// Round-to-nearest intrinsics: the host's float operations are IEEE round-to-nearest already
// (the including file must not be compiled with FP contraction).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((uint64_t(a) * b) >> 32); }
inline int max(int a, int b) { return std::max(a, b); }
inline int min(int a, int b) { return std::min(a, b); }

namespace ringbench::cuda::emu {

inline thread_local std::barrier<>* block_barrier = nullptr;

// Every thread of the block runs `body`; a thread that finished stops counting at the barrier
// (as exited threads do on current GPUs).
template <class Body>
void run(unsigned grid, unsigned block, const Body& body) {
  if (grid == 0 || block == 0 || block > 1024)
    throw Error("emulated launch: grid " + std::to_string(grid) + ", block " + std::to_string(block));
  for (unsigned b = 0; b < grid; ++b) {
    std::barrier<> bar(block);
    std::vector<std::thread> threads;
    threads.reserve(block);
    for (unsigned t = 0; t < block; ++t)
      threads.emplace_back([&, t] {
        threadIdx.x = t;
        blockIdx.x = b;
        blockDim.x = block;
        gridDim.x = grid;
        block_barrier = &bar;
        body();
        bar.arrive_and_drop();
      });
    for (auto& th : threads) th.join();
  }
}

template <class... P>
auto launch(void (*kernel)(P...), unsigned grid, unsigned block, cudaStream_t /*launches are synchronous*/) {
  return [=](auto&&... args) { run(grid, block, [&] { kernel(args...); }); };
}

}  // namespace ringbench::cuda::emu

inline void __syncthreads() { ringbench::cuda::emu::block_barrier->arrive_and_wait(); }

#define RB_LAUNCH(kernel, grid, block, stream) ::ringbench::cuda::emu::launch(kernel, (grid), (block), (stream))
#define RB_CUDA(call) (void)(call)
