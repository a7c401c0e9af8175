// The CUDA backend's own kernels; see layer_kernels.h for what each computes. Elementwise
// kernels use grid-stride loops over int64 indices; per-channel reductions use one block per
// channel. Backward kernels gather (each input element sums what it receives) rather than
// scatter with atomics, so they are deterministic and can overwrite or accumulate.
#include "models/cuda/layer_kernels.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#ifdef RINGBENCH_CUDA_EMULATION
#include "collectives/reduce.h"
#include "cuda/emulation.h"  // tests without a GPU: the kernels on host threads
// cuda_fp16.h's and cuda_bf16.h's 2-byte types and their round-to-nearest-even conversions, by
// the host's exact scalar ones (collectives/reduce.h; here, not in cuda/emulation.h, which sits
// below collectives/): so an emulated test checks a cast kernel's indexing and accumulation, not
// the GPU's rounding (the gpu tests compare that).
struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
inline __half __float2half_rn(float f) { return {ringbench::float_to_half(f)}; }
inline float __half2float(__half h) { return ringbench::half_to_float(h.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return {ringbench::float_to_bf16(f)}; }
inline float __bfloat162float(__nv_bfloat16 b) { return ringbench::bf16_to_float(b.bits); }
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/check.h"
#define RB_LAUNCH(kernel, grid, block, stream) kernel<<<(grid), (block), 0, (stream)>>>
#endif

namespace ringbench::models::gpu {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  return unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t(1) << 20));
}

#define RB_LAUNCHED() RB_CUDA(cudaGetLastError())

__device__ inline int64_t first_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_stride() { return int64_t(blockDim.x) * gridDim.x; }

// ---------------------------------------------------------------------------------------------
// Elementwise

__global__ void relu6_forward_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float v = x[i];
    y[i] = v > 0.0f ? fminf(v, 6.0f) : 0.0f;
  }
}

__global__ void relu6_backward_kernel(const float* x, const float* dy, float* dx, int64_t n, bool accumulate) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float v = x[i];
    const float g = (v > 0.0f && v < 6.0f) ? dy[i] : 0.0f;
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

// models::dropout_keep() (graph.cc), bit for bit.
__device__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__device__ inline bool dropout_keep(const DropoutMask& m, int64_t sample, int64_t elem) {
  uint64_t h = splitmix64(m.seed ^ 0x64726f706f7574ull);  // "dropout"
  h = splitmix64(h ^ m.step);
  h = splitmix64(h ^ uint64_t(m.node));
  h = splitmix64(h ^ uint64_t(sample));
  h = splitmix64(h ^ uint64_t(elem));
  const double u = double(h >> 40) * 0x1.0p-24;  // [0, 1), 24 bits
  return u >= double(m.rate);
}

// __fmul_rn: a plain rounded product, never contracted into an FMA with the sum, so kept values
// equal the CPU backends' x * scale exactly.
__global__ void dropout_forward_kernel(DropoutMask m, int64_t n, float scale, const float* x, float* y) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const bool keep = dropout_keep(m, m.sample_offset + i / m.per_sample, i % m.per_sample);
    y[i] = keep ? __fmul_rn(x[i], scale) : 0.0f;
  }
}

__global__ void dropout_backward_kernel(DropoutMask m, int64_t n, float scale, const float* dy, float* dx,
                                        bool accumulate) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const bool keep = dropout_keep(m, m.sample_offset + i / m.per_sample, i % m.per_sample);
    const float g = keep ? __fmul_rn(dy[i], scale) : 0.0f;
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

__global__ void copy_rows_kernel(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
                                 int64_t row_len, int64_t n, bool accumulate) {
  for (int64_t k = first_index(); k < n; k += grid_stride()) {
    const int64_t r = k / row_len, i = k % row_len;
    const float v = src[r * src_stride + i];
    float& d = dst[r * dst_stride + i];
    d = accumulate ? d + v : v;
  }
}

__global__ void bias_add_kernel(float* y, const float* b, int channels, int64_t spatial, int64_t n) {
  for (int64_t k = first_index(); k < n; k += grid_stride()) y[k] += b[(k / spatial) % channels];
}

// (PadSpec's padded_h() and padded_w() are host functions.)
__global__ void pad_kernel(PadSpec p, int64_t n, const float* x, float* xp) {
  const int ph = p.h + p.top + p.bottom, pw = p.w + p.left + p.right;
  for (int64_t k = first_index(); k < n; k += grid_stride()) {
    const int px = int(k % pw);
    const int py = int(k / pw % ph);
    const int64_t plane = k / (int64_t(pw) * ph);
    const int iy = py - p.top, ix = px - p.left;
    xp[k] = (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w) ? x[(plane * p.h + iy) * p.w + ix] : 0.0f;
  }
}

__global__ void crop_kernel(PadSpec p, int64_t n, const float* xp, float* x, bool accumulate) {
  const int ph = p.h + p.top + p.bottom, pw = p.w + p.left + p.right;
  for (int64_t k = first_index(); k < n; k += grid_stride()) {
    const int ix = int(k % p.w);
    const int iy = int(k / p.w % p.h);
    const int64_t plane = k / (int64_t(p.w) * p.h);
    const float v = xp[(plane * ph + iy + p.top) * pw + ix + p.left];
    x[k] = accumulate ? x[k] + v : v;
  }
}

// ---------------------------------------------------------------------------------------------
// Casts (collectives/device_reduce.cu converts the same way)

template <class T>
__device__ inline T round_to(float v);
template <>
__device__ inline __half round_to<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ inline __nv_bfloat16 round_to<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
__device__ inline float to_float(__half v) { return __half2float(v); }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__global__ void narrow_kernel(const float* src, T* dst, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = round_to<T>(src[i]);
}

template <class T>
__global__ void widen_kernel(const T* src, float* dst, int64_t n, bool accumulate) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float v = to_float(src[i]);
    dst[i] = accumulate ? dst[i] + v : v;
  }
}

[[noreturn]] void not_two_bytes(DType t) {
  throw std::invalid_argument(std::string("gpu cast: ") + (t == DType::f32 ? "fp32" : "unknown type") +
                              " is not a 2-byte type (bf16 or fp16)");
}

// ---------------------------------------------------------------------------------------------
// Pooling

// The taps of window `o` along one axis that lie inside the image: input positions
// [start + lo, start + hi).
struct Taps {
  int start, lo, hi;
};
__device__ inline Taps taps(int o, int stride, int pad, int kernel, int in) {
  const int start = o * stride - pad;
  return {start, max(0, -start), min(kernel, in - start)};
}

// The windows along one axis that contain input position i: [first, last] (empty if first > last).
__device__ inline void covering(int i, int stride, int pad, int kernel, int out, int& first, int& last) {
  const int lo = i + pad - kernel + 1;  // o * stride >= lo
  first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  last = min(out - 1, (i + pad) / stride);
}

// Output element o's window: the offset of the input plane it reads and its taps along each axis.
struct Window {
  int64_t plane;
  Taps ty, tx;
};
__device__ inline Window window(const PoolGeometry& g, int64_t o) {
  const int ox = int(o % g.out_w);
  const int oy = int(o / g.out_w % g.out_h);
  return {o / (int64_t(g.out_w) * g.out_h) * (int64_t(g.in_h) * g.in_w),
          taps(oy, g.stride_h, g.pad_top, g.kh, g.in_h), taps(ox, g.stride_w, g.pad_left, g.kw, g.in_w)};
}

__global__ void max_pool_forward_kernel(PoolGeometry g, int64_t n, const float* x, float* y, int32_t* argmax) {
  for (int64_t o = first_index(); o < n; o += grid_stride()) {
    const auto [offset, ty, tx] = window(g, o);
    const float* plane = x + offset;
    int32_t best = -1;
    float best_v = 0.0f;
    for (int ky = ty.lo; ky < ty.hi; ++ky)
      for (int kx = tx.lo; kx < tx.hi; ++kx) {
        const int32_t at = (ty.start + ky) * g.in_w + tx.start + kx;
        const float v = plane[at];
        if (best < 0 || v > best_v) {
          best = at;
          best_v = v;
        }
      }
    y[o] = best >= 0 ? best_v : 0.0f;
    if (argmax) argmax[o] = best;
  }
}

__global__ void max_pool_backward_kernel(PoolGeometry g, int64_t n, const float* dy, const int32_t* argmax,
                                         float* dx, bool accumulate) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int ix = int(i % g.in_w);
    const int iy = int(i / g.in_w % g.in_h);
    const int64_t plane = i / (int64_t(g.in_w) * g.in_h);
    const int32_t me = iy * g.in_w + ix;
    int oy0, oy1, ox0, ox1;
    covering(iy, g.stride_h, g.pad_top, g.kh, g.out_h, oy0, oy1);
    covering(ix, g.stride_w, g.pad_left, g.kw, g.out_w, ox0, ox1);
    float sum = 0.0f;
    for (int oy = oy0; oy <= oy1; ++oy)
      for (int ox = ox0; ox <= ox1; ++ox) {
        const int64_t o = (plane * g.out_h + oy) * g.out_w + ox;
        if (argmax[o] == me) sum += dy[o];
      }
    dx[i] = accumulate ? dx[i] + sum : sum;
  }
}

__device__ inline int avg_divisor(const PoolGeometry& g, bool exclude_padding, const Taps& ty, const Taps& tx) {
  return exclude_padding ? (ty.hi - ty.lo) * (tx.hi - tx.lo) : g.kh * g.kw;
}

__global__ void avg_pool_forward_kernel(PoolGeometry g, bool exclude_padding, int64_t n, const float* x, float* y) {
  for (int64_t o = first_index(); o < n; o += grid_stride()) {
    const auto [offset, ty, tx] = window(g, o);
    const float* plane = x + offset;
    float sum = 0.0f;
    for (int ky = ty.lo; ky < ty.hi; ++ky)
      for (int kx = tx.lo; kx < tx.hi; ++kx) sum += plane[(ty.start + ky) * g.in_w + tx.start + kx];
    const int divisor = avg_divisor(g, exclude_padding, ty, tx);
    y[o] = divisor > 0 ? sum / float(divisor) : 0.0f;
  }
}

__global__ void avg_pool_backward_kernel(PoolGeometry g, bool exclude_padding, int64_t n, const float* dy,
                                         float* dx, bool accumulate) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int ix = int(i % g.in_w);
    const int iy = int(i / g.in_w % g.in_h);
    const int64_t plane = i / (int64_t(g.in_w) * g.in_h);
    int oy0, oy1, ox0, ox1;
    covering(iy, g.stride_h, g.pad_top, g.kh, g.out_h, oy0, oy1);
    covering(ix, g.stride_w, g.pad_left, g.kw, g.out_w, ox0, ox1);
    float sum = 0.0f;
    for (int oy = oy0; oy <= oy1; ++oy) {
      const Taps ty = taps(oy, g.stride_h, g.pad_top, g.kh, g.in_h);
      for (int ox = ox0; ox <= ox1; ++ox) {
        const Taps tx = taps(ox, g.stride_w, g.pad_left, g.kw, g.in_w);
        const int divisor = avg_divisor(g, exclude_padding, ty, tx);
        if (divisor > 0) sum += dy[(plane * g.out_h + oy) * g.out_w + ox] / float(divisor);
      }
    }
    dx[i] = accumulate ? dx[i] + sum : sum;
  }
}

// ---------------------------------------------------------------------------------------------
// Per-channel reductions: one block per channel over batch x spatial values.

// Sums `v` over the block; every thread gets the total. `buf` has kThreads floats.
__device__ float block_sum(float v, float* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) buf[threadIdx.x] += buf[threadIdx.x + half];
    __syncthreads();
  }
  const float total = buf[0];
  __syncthreads();  // buf may be reused right after
  return total;
}

__device__ inline int64_t channel_at(int c, int channels, int64_t spatial, int64_t k) {
  return (k / spatial * channels + c) * spatial + k % spatial;  // k over batch x spatial
}

__global__ void bias_grad_kernel(const float* dy, float* db, int channels, int64_t spatial, int64_t m) {
  __shared__ float buf[kThreads];
  const int c = int(blockIdx.x);
  float s = 0.0f;
  for (int64_t k = threadIdx.x; k < m; k += kThreads) s += dy[channel_at(c, channels, spatial, k)];
  s = block_sum(s, buf);
  if (threadIdx.x == 0) db[c] = s;
}

__global__ void bn_backward_global_kernel(const float* x, const float* dy, const float* gamma, const float* mean,
                                          const float* var, double eps, int channels, int64_t spatial, int64_t m,
                                          float* dx, float* dgamma, float* dbeta, bool accumulate) {
  __shared__ float buf[kThreads];
  const int c = int(blockIdx.x);
  const float mu = mean[c];
  const float invstd = float(1.0 / sqrt(double(var[c]) + eps));
  float s_dy = 0.0f, s_dy_xhat = 0.0f;
  for (int64_t k = threadIdx.x; k < m; k += kThreads) {
    const int64_t at = channel_at(c, channels, spatial, k);
    const float g = dy[at];
    s_dy += g;
    s_dy_xhat += g * (x[at] - mu) * invstd;
  }
  s_dy = block_sum(s_dy, buf);
  s_dy_xhat = block_sum(s_dy_xhat, buf);
  if (threadIdx.x == 0) {
    dbeta[c] = s_dy;
    dgamma[c] = s_dy_xhat;
  }
  const float scale = gamma[c] * invstd;
  for (int64_t k = threadIdx.x; k < m; k += kThreads) {
    const int64_t at = channel_at(c, channels, spatial, k);
    const float g = scale * dy[at];
    dx[at] = accumulate ? dx[at] + g : g;
  }
}

__global__ void bn_running_single_kernel(const float* batch_mean, float* running_mean, float* running_var,
                                         int channels, float momentum) {
  for (int64_t c = first_index(); c < channels; c += grid_stride()) {
    running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * batch_mean[c];
    running_var[c] = (1.0f - momentum) * running_var[c];
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Host wrappers

void relu6_forward(const float* x, float* y, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  RB_LAUNCH(relu6_forward_kernel, blocks_for(count), kThreads, stream)(x, y, count);
  RB_LAUNCHED();
}

void relu6_backward(const float* x, const float* dy, float* dx, int64_t count, bool accumulate, cudaStream_t stream) {
  if (count <= 0) return;
  RB_LAUNCH(relu6_backward_kernel, blocks_for(count), kThreads, stream)(x, dy, dx, count, accumulate);
  RB_LAUNCHED();
}

void dropout_forward(const DropoutMask& m, int batch, const float* x, float* y, cudaStream_t stream) {
  const int64_t n = int64_t(batch) * m.per_sample;
  if (n <= 0) return;
  const float scale = 1.0f / (1.0f - m.rate);
  RB_LAUNCH(dropout_forward_kernel, blocks_for(n), kThreads, stream)(m, n, scale, x, y);
  RB_LAUNCHED();
}

void dropout_backward(const DropoutMask& m, int batch, const float* dy, float* dx, bool accumulate,
                      cudaStream_t stream) {
  const int64_t n = int64_t(batch) * m.per_sample;
  if (n <= 0) return;
  const float scale = 1.0f / (1.0f - m.rate);
  RB_LAUNCH(dropout_backward_kernel, blocks_for(n), kThreads, stream)(m, n, scale, dy, dx, accumulate);
  RB_LAUNCHED();
}

void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t row_len, int64_t rows,
               bool accumulate, cudaStream_t stream) {
  const int64_t n = row_len * rows;
  if (n <= 0) return;
  RB_LAUNCH(copy_rows_kernel, blocks_for(n), kThreads, stream)(dst, dst_stride, src, src_stride, row_len, n, accumulate);
  RB_LAUNCHED();
}

void bias_add(float* y, const float* b, int batch, int channels, int64_t spatial, cudaStream_t stream) {
  const int64_t n = int64_t(batch) * channels * spatial;
  if (n <= 0) return;
  RB_LAUNCH(bias_add_kernel, blocks_for(n), kThreads, stream)(y, b, channels, spatial, n);
  RB_LAUNCHED();
}

void bias_grad(const float* dy, float* db, int batch, int channels, int64_t spatial, cudaStream_t stream) {
  if (channels <= 0) return;
  RB_LAUNCH(bias_grad_kernel, unsigned(channels), kThreads, stream)(dy, db, channels, spatial, int64_t(batch) * spatial);
  RB_LAUNCHED();
}

void pad_planes(const PadSpec& p, int64_t planes, const float* x, float* xp, cudaStream_t stream) {
  const int64_t n = planes * p.padded_h() * p.padded_w();
  if (n <= 0) return;
  RB_LAUNCH(pad_kernel, blocks_for(n), kThreads, stream)(p, n, x, xp);
  RB_LAUNCHED();
}

void crop_planes(const PadSpec& p, int64_t planes, const float* xp, float* x, bool accumulate, cudaStream_t stream) {
  const int64_t n = planes * p.h * p.w;
  if (n <= 0) return;
  RB_LAUNCH(crop_kernel, blocks_for(n), kThreads, stream)(p, n, xp, x, accumulate);
  RB_LAUNCHED();
}

void narrow(DType t, const float* src, void* dst, int64_t count, cudaStream_t stream) {
  if (t != DType::bf16 && t != DType::f16) not_two_bytes(t);
  if (count <= 0) return;
  if (t == DType::bf16)
    RB_LAUNCH(narrow_kernel<__nv_bfloat16>, blocks_for(count), kThreads, stream)(
        src, static_cast<__nv_bfloat16*>(dst), count);
  else
    RB_LAUNCH(narrow_kernel<__half>, blocks_for(count), kThreads, stream)(src, static_cast<__half*>(dst), count);
  RB_LAUNCHED();
}

void widen(DType t, const void* src, float* dst, int64_t count, bool accumulate, cudaStream_t stream) {
  if (t != DType::bf16 && t != DType::f16) not_two_bytes(t);
  if (count <= 0) return;
  if (t == DType::bf16)
    RB_LAUNCH(widen_kernel<__nv_bfloat16>, blocks_for(count), kThreads, stream)(
        static_cast<const __nv_bfloat16*>(src), dst, count, accumulate);
  else
    RB_LAUNCH(widen_kernel<__half>, blocks_for(count), kThreads, stream)(static_cast<const __half*>(src), dst, count,
                                                                       accumulate);
  RB_LAUNCHED();
}

void max_pool_forward(const PoolGeometry& g, int64_t planes, const float* x, float* y, int32_t* argmax,
                      cudaStream_t stream) {
  const int64_t n = planes * g.out_h * g.out_w;
  if (n <= 0) return;
  RB_LAUNCH(max_pool_forward_kernel, blocks_for(n), kThreads, stream)(g, n, x, y, argmax);
  RB_LAUNCHED();
}

void max_pool_backward(const PoolGeometry& g, int64_t planes, const float* dy, const int32_t* argmax, float* dx,
                       bool accumulate, cudaStream_t stream) {
  const int64_t n = planes * g.in_h * g.in_w;
  if (n <= 0) return;
  RB_LAUNCH(max_pool_backward_kernel, blocks_for(n), kThreads, stream)(g, n, dy, argmax, dx, accumulate);
  RB_LAUNCHED();
}

void avg_pool_forward(const PoolGeometry& g, bool exclude_padding, int64_t planes, const float* x, float* y,
                      cudaStream_t stream) {
  const int64_t n = planes * g.out_h * g.out_w;
  if (n <= 0) return;
  RB_LAUNCH(avg_pool_forward_kernel, blocks_for(n), kThreads, stream)(g, exclude_padding, n, x, y);
  RB_LAUNCHED();
}

void avg_pool_backward(const PoolGeometry& g, bool exclude_padding, int64_t planes, const float* dy, float* dx,
                       bool accumulate, cudaStream_t stream) {
  const int64_t n = planes * g.in_h * g.in_w;
  if (n <= 0) return;
  RB_LAUNCH(avg_pool_backward_kernel, blocks_for(n), kThreads, stream)(g, exclude_padding, n, dy, dx, accumulate);
  RB_LAUNCHED();
}

void bn_backward_global(const float* x, const float* dy, const float* gamma, const float* running_mean,
                        const float* running_var, double eps, int batch, int channels, int64_t spatial, float* dx,
                        float* dgamma, float* dbeta, bool accumulate, cudaStream_t stream) {
  if (channels <= 0) return;
  RB_LAUNCH(bn_backward_global_kernel, unsigned(channels), kThreads, stream)(
      x, dy, gamma, running_mean, running_var, eps, channels, spatial, int64_t(batch) * spatial, dx, dgamma, dbeta,
      accumulate);
  RB_LAUNCHED();
}

void bn_running_single(const float* batch_mean, float* running_mean, float* running_var, int channels,
                       float momentum, cudaStream_t stream) {
  if (channels <= 0) return;
  RB_LAUNCH(bn_running_single_kernel, blocks_for(channels), kThreads, stream)(batch_mean, running_mean, running_var,
                                                                          channels, momentum);
  RB_LAUNCHED();
}

}  // namespace ringbench::models::gpu
