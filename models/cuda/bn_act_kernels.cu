// Batch norm fused with its activation; see bn_act_kernels.h. The per-channel sums run over
// bn_act_splits() blocks per channel, each writing a partial pair that a second kernel adds in
// split order. Elementwise passes use grid-stride
// loops over 32-bit indices, divided by multiply and shift (cuda/fast_div.h).
#include "models/cuda/bn_act_kernels.h"

#include <algorithm>
#include <string>

#include "base/errors.h"
#include "cuda/fast_div.h"

#ifdef RINGBENCH_CUDA_EMULATION
#include "cuda/emulation.h"  // tests without a GPU: the kernels on host threads
#else
#include "cuda/check.h"
#define RB_LAUNCH(kernel, grid, block, stream) kernel<<<(grid), (block), 0, (stream)>>>
#endif

namespace ringbench::models::gpu {
namespace {
// Named, so that the emulation test can compile this file beside layer_kernels.cu in one unit.
namespace bn_act {

constexpr int kThreads = 256;

// Indices are 32-bit (bn_act_fits()) and divided with cuda::FastDiv.
struct Layout {
  cuda::FastDiv channels, spatial;
  uint32_t m;       // values per channel (batch x spatial)
  uint32_t splits;  // blocks per channel in the sums
};

Layout layout(const BnShape& s) {
  if (!bn_act_fits(s))
    throw Error("fused batch norm: " + std::to_string(s.batch) + " x " + std::to_string(s.channels) + " x " +
                std::to_string(s.spatial) + " values exceed its 32-bit indices");
  return {cuda::FastDiv(uint32_t(s.channels)), cuda::FastDiv(uint32_t(s.spatial)), uint32_t(s.per_channel()),
          uint32_t(bn_act_splits(s))};
}

unsigned blocks_for(int64_t n) {
  return unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t(1) << 20));
}

__device__ inline uint32_t first_index() { return blockIdx.x * blockDim.x + threadIdx.x; }
__device__ inline uint32_t grid_stride() { return blockDim.x * gridDim.x; }

// Element k (over batch x spatial) of channel c.
__device__ inline uint32_t at(const Layout& l, uint32_t c, uint32_t k) {
  const uint32_t n = l.spatial.div(k);
  return (n * l.channels.d + c) * l.spatial.d + (k - n * l.spatial.d);
}

// The channel of element i (NCHW).
__device__ inline uint32_t channel_of(const Layout& l, uint32_t i) { return l.channels.mod(l.spatial.div(i)); }

// This block's channel and its split's range [begin, end) of k.
struct Part {
  uint32_t c, begin, end;
};
__device__ inline Part part(const Layout& l) {
  const uint32_t chunk = (l.m + l.splits - 1) / l.splits;
  const uint32_t begin = (blockIdx.x % l.splits) * chunk;
  return {blockIdx.x / l.splits, begin < l.m ? begin : l.m, begin + chunk < l.m ? begin + chunk : l.m};
}

// Sums a and b over the block into thread 0's (every thread's) a and b; `buf` has 2 x kThreads.
__device__ void block_sum2(double& a, double& b, double* buf) {
  const int t = int(threadIdx.x);
  buf[t] = a;
  buf[kThreads + t] = b;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) {
      buf[t] += buf[t + half];
      buf[kThreads + t] += buf[kThreads + t + half];
    }
    __syncthreads();
  }
  a = buf[0];
  b = buf[kThreads];
  __syncthreads();  // buf may be reused right after
}

__device__ inline float activate(BnActivation act, float v) {
  if (act == BnActivation::none) return v;
  if (act == BnActivation::relu) return v > 0.0f ? v : 0.0f;
  return v > 0.0f ? fminf(v, 6.0f) : 0.0f;
}

// Whether the activation passes the gradient at pre-activation value v (the reference's rule).
__device__ inline bool passes(BnActivation act, float v) {
  if (act == BnActivation::none) return true;
  return act == BnActivation::relu ? v > 0.0f : (v > 0.0f && v < 6.0f);
}

// xhat = (x - mean) * invstd and the batch norm's output gamma * xhat + beta, each operation
// rounded alone (never contracted into an FMA), so that the backward recomputes bit for bit the
// value the forward activated and takes the same side of 0 and 6.
struct Normalised {
  float xhat, pre;
};
__device__ inline Normalised normalise(float x, float mean, float invstd, float gamma, float beta) {
  const float xhat = __fmul_rn(__fsub_rn(x, mean), invstd);
  return {xhat, __fadd_rn(__fmul_rn(xhat, gamma), beta)};
}

// ---------------------------------------------------------------------------------------------
// Forward

__global__ void stats_partial_kernel(Layout l, const float* x, double* partials) {
  __shared__ double buf[2 * kThreads];
  const Part p = part(l);
  double s = 0, ss = 0;
  for (uint32_t k = p.begin + threadIdx.x; k < p.end; k += kThreads) {
    const double v = x[at(l, p.c, k)];
    s += v;
    ss += v * v;
  }
  block_sum2(s, ss, buf);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = s;
    partials[2 * blockIdx.x + 1] = ss;
  }
}

__global__ void stats_final_kernel(Layout l, const double* partials, BnTensors t, double eps, float momentum) {
  for (uint32_t c = first_index(); c < l.channels.d; c += grid_stride()) {
    double s = 0, ss = 0;
    for (uint32_t k = 0; k < l.splits; ++k) {
      s += partials[2 * (c * l.splits + k)];
      ss += partials[2 * (c * l.splits + k) + 1];
    }
    const double m = double(l.m), mean = s / m;
    const double var = fmax(ss / m - mean * mean, 0.0);  // biased: normalises
    const double unbiased = l.m > 1 ? var * m / (m - 1) : var;
    const double mom = double(momentum);
    t.mean[c] = float(mean);
    t.invstd[c] = float(1.0 / sqrt(var + eps));
    t.running[c] = float((1 - mom) * double(t.running[c]) + mom * mean);
    t.running[l.channels.d + c] = float((1 - mom) * double(t.running[l.channels.d + c]) + mom * unbiased);
  }
}

__global__ void running_stats_kernel(uint32_t channels, BnTensors t, double eps) {
  for (uint32_t c = first_index(); c < channels; c += grid_stride()) {
    t.mean[c] = t.running[c];
    t.invstd[c] = float(1.0 / sqrt(double(t.running[channels + c]) + eps));
  }
}

__global__ void apply_kernel(Layout l, uint32_t n, BnActivation act, const float* x, BnTensors t, float* y) {
  for (uint32_t i = first_index(); i < n; i += grid_stride()) {
    const uint32_t c = channel_of(l, i);
    y[i] = activate(act, normalise(x[i], t.mean[c], t.invstd[c], t.gamma[c], t.beta[c]).pre);
  }
}

// ---------------------------------------------------------------------------------------------
// Backward

__global__ void grad_partial_kernel(Layout l, BnActivation act, const float* x, const float* dy, BnTensors t,
                                    double* partials) {
  __shared__ double buf[2 * kThreads];
  const Part p = part(l);
  const float mean = t.mean[p.c], invstd = t.invstd[p.c], gamma = t.gamma[p.c], beta = t.beta[p.c];
  double sg = 0, sgx = 0;
  for (uint32_t k = p.begin + threadIdx.x; k < p.end; k += kThreads) {
    const uint32_t i = at(l, p.c, k);
    const Normalised v = normalise(x[i], mean, invstd, gamma, beta);
    const double g = passes(act, v.pre) ? dy[i] : 0.0f;
    sg += g;
    sgx += g * double(v.xhat);
  }
  block_sum2(sg, sgx, buf);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = sg;
    partials[2 * blockIdx.x + 1] = sgx;
  }
}

__global__ void grad_final_kernel(Layout l, const double* partials, float* dgamma, float* dbeta) {
  for (uint32_t c = first_index(); c < l.channels.d; c += grid_stride()) {
    double sg = 0, sgx = 0;
    for (uint32_t k = 0; k < l.splits; ++k) {
      sg += partials[2 * (c * l.splits + k)];
      sgx += partials[2 * (c * l.splits + k) + 1];
    }
    dbeta[c] = float(sg);
    dgamma[c] = float(sgx);
  }
}

__global__ void grad_input_kernel(Layout l, uint32_t n, BnActivation act, bool batch_stats, const float* x,
                                  const float* dy, BnTensors t, BnGrads out, float inv_m) {
  for (uint32_t i = first_index(); i < n; i += grid_stride()) {
    const uint32_t c = channel_of(l, i);
    const Normalised nv = normalise(x[i], t.mean[c], t.invstd[c], t.gamma[c], t.beta[c]);
    const float g = passes(act, nv.pre) ? dy[i] : 0.0f;
    float v = g;
    if (batch_stats) v = g - out.dbeta[c] * inv_m - nv.xhat * out.dgamma[c] * inv_m;
    v *= t.gamma[c] * t.invstd[c];
    out.dx[i] = out.accumulate ? out.dx[i] + v : v;
  }
}

}  // namespace bn_act
}  // namespace

// ---------------------------------------------------------------------------------------------
// Host wrappers

#define RB_BN_LAUNCHED() RB_CUDA(cudaGetLastError())

void bn_act_forward_training(const BnShape& s, BnActivation act, const float* x, const BnTensors& t, double eps,
                             float momentum, double* scratch, float* y, cudaStream_t stream) {
  using namespace bn_act;
  const Layout l = layout(s);
  RB_LAUNCH(stats_partial_kernel, unsigned(s.channels) * l.splits, kThreads, stream)(l, x, scratch);
  RB_BN_LAUNCHED();
  RB_LAUNCH(stats_final_kernel, blocks_for(s.channels), kThreads, stream)(l, scratch, t, eps, momentum);
  RB_BN_LAUNCHED();
  const uint32_t n = uint32_t(s.per_channel() * s.channels);
  RB_LAUNCH(apply_kernel, blocks_for(n), kThreads, stream)(l, n, act, x, t, y);
  RB_BN_LAUNCHED();
}

void bn_act_forward_inference(const BnShape& s, BnActivation act, const float* x, const BnTensors& t, double eps,
                              float* y, cudaStream_t stream) {
  using namespace bn_act;
  const Layout l = layout(s);
  RB_LAUNCH(running_stats_kernel, blocks_for(s.channels), kThreads, stream)(uint32_t(s.channels), t, eps);
  RB_BN_LAUNCHED();
  const uint32_t n = uint32_t(s.per_channel() * s.channels);
  RB_LAUNCH(apply_kernel, blocks_for(n), kThreads, stream)(l, n, act, x, t, y);
  RB_BN_LAUNCHED();
}

void bn_act_backward(const BnShape& s, BnActivation act, bool batch_stats, const float* x, const float* dy,
                     const BnTensors& t, double* scratch, const BnGrads& out, cudaStream_t stream) {
  using namespace bn_act;
  const Layout l = layout(s);
  RB_LAUNCH(grad_partial_kernel, unsigned(s.channels) * l.splits, kThreads, stream)(l, act, x, dy, t, scratch);
  RB_BN_LAUNCHED();
  RB_LAUNCH(grad_final_kernel, blocks_for(s.channels), kThreads, stream)(l, scratch, out.dgamma, out.dbeta);
  RB_BN_LAUNCHED();
  const uint32_t n = uint32_t(s.per_channel() * s.channels);
  RB_LAUNCH(grad_input_kernel, blocks_for(n), kThreads, stream)(l, n, act, batch_stats, x, dy, t, out,
                                                                1.0f / float(l.m));
  RB_BN_LAUNCHED();
}

#undef RB_BN_LAUNCHED

}  // namespace ringbench::models::gpu
