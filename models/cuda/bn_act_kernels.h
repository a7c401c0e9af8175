// Batch norm fused with the activation that follows it (ReLU, ReLU6, or none), forward and
// backward, NCHW float32 in device memory. Unfused, cuDNN's batch norm and the activation are
// separate memory-bound passes that write and re-read the normalised tensor (about 5 tensor
// reads and writes forward, 8 backward); fused, the training forward reads x twice
// (statistics, then normalise + activate) and writes y once, and the backward reads x and dy
// twice and writes dx once: the pre-activation value is never stored, the backward recomputes
// it bit for bit from x and the saved statistics for the activation's gradient mask (passes
// where 0 < value, and value < 6 for ReLU6, as the reference's separate layers do).
//
// Statistics and the loss-side sums are accumulated in double (per thread, then per block, then
// per channel in a fixed order): deterministic, and within float rounding of the reference
// backend's double arithmetic. Running statistics follow the reference: running = (1 -
// momentum) * running + momentum * batch, the variance unbiased (biased with one value per
// channel). Every call only queues work on `stream` (a launch error throws Error).
#pragma once

#ifdef RINGBENCH_CUDA_EMULATION
#include "cuda/emulation.h"
#else
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace ringbench::models::gpu {

enum class BnActivation { none, relu, relu6 };

struct BnShape {
  int batch = 0, channels = 0;
  int64_t spatial = 0;  // h * w
  int64_t per_channel() const { return int64_t(batch) * spatial; }
};

// The batch norm's parameters and statistics, all `channels` floats in device memory. `mean`
// and `invstd` are the statistics the forward normalised with (a training forward writes them
// and the backward reads them); `running` is [mean | var], 2 x channels.
struct BnTensors {
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float* running = nullptr;
  float* mean = nullptr;
  float* invstd = nullptr;
};

// (Inline, the functions without a stream: the emulation test compiles the kernels' file with
// its own cudaStream_t type beside the CUDA library's copy.)

// Whether the kernels take this shape: batch x channels x spatial below 2^31 (their indices are
// 32-bit); the calls below throw Error otherwise.
inline bool bn_act_fits(const BnShape& s) {
  return s.batch >= 1 && s.channels >= 1 && s.spatial >= 1 && s.per_channel() * s.channels < (int64_t(1) << 31);
}

// Blocks per channel in the per-channel sums: one per 2048 values, at most 64 (one block per
// channel would leave most of the GPU idle on early layers: MobileNet's first has 32 channels
// of batch x 112 x 112 values).
inline int bn_act_splits(const BnShape& s) {
  return int(std::clamp<int64_t>((s.per_channel() + 2047) / 2048, 1, 64));
}

// Doubles of scratch the calls below need for `shape` (one partial pair per block); the same for
// forward and backward.
inline size_t bn_act_scratch_doubles(const BnShape& s) { return size_t(s.channels) * size_t(bn_act_splits(s)) * 2; }

// Training forward: batch statistics into t.mean and t.invstd, the running statistics updated,
// y = act(gamma * (x - mean) * invstd + beta).
void bn_act_forward_training(const BnShape& s, BnActivation act, const float* x, const BnTensors& t, double eps,
                             float momentum, double* scratch, float* y, cudaStream_t stream);

// Inference forward with the running statistics (t.mean and t.invstd receive them, as used).
void bn_act_forward_inference(const BnShape& s, BnActivation act, const float* x, const BnTensors& t, double eps,
                              float* y, cudaStream_t stream);

// Backward from the activation's output gradient dy: with g = dy where the activation passes
// (t as the forward left it), dgamma = sum(g * xhat), dbeta = sum(g) (overwritten) and dx (+)=
// gamma * invstd * (g - dbeta / M - xhat * dgamma / M) after a training forward (`batch_stats`),
// gamma * invstd * g after an inference one. xhat = (x - mean) * invstd, M = batch x spatial.
struct BnGrads {
  float* dx = nullptr;
  float* dgamma = nullptr;
  float* dbeta = nullptr;
  bool accumulate = false;  // dx += instead of =
};
void bn_act_backward(const BnShape& s, BnActivation act, bool batch_stats, const float* x, const float* dy,
                     const BnTensors& t, double* scratch, const BnGrads& out, cudaStream_t stream);

}  // namespace ringbench::models::gpu
