// The CUDA backend's own kernels (layer_kernels.cu), for what cuDNN and cuBLAS do not do the
// way the reference backend does: relu6, dropout (the same dropout_keep() hash on the device),
// concat copies, bias add and gradient, explicit padding for asymmetric convolution pads, max
// pooling (first tap wins ties, deterministic), pooling with asymmetric pads, batch norm's
// backward through running statistics, and the casts around bf16/fp16 convolutions and fully
// connected layers. Buffers are NCHW float32 in device memory (the casts' 2-byte side aside);
// every call only queues work on `stream` (a launch error throws Error).
//
// `accumulate`: add into the destination (a node's gradient that an earlier consumer already
// wrote) instead of overwriting it.
#pragma once

#ifdef RINGBENCH_CUDA_EMULATION
#include "cuda/emulation.h"
#else
#include <cuda_runtime.h>
#endif

#include <cstdint>

#include "collectives/dtype.h"

namespace ringbench::models::gpu {

// ReLU6: y = min(max(x, 0), 6); the gradient passes where 0 < x < 6.
void relu6_forward(const float* x, float* y, int64_t count, cudaStream_t stream);
void relu6_backward(const float* x, const float* dy, float* dx, int64_t count, bool accumulate,
                    cudaStream_t stream);

// Dropout with models::dropout_keep()'s decision for element `e` of sample `n`:
// dropout_keep(seed, step, node, sample_offset + n, e, rate); kept values scaled by 1/(1-rate).
// Backward recomputes the same mask (no mask is stored).
struct DropoutMask {
  uint64_t seed = 0, step = 0;
  int node = 0;
  int64_t sample_offset = 0;
  int64_t per_sample = 0;  // elements per sample
  float rate = 0;
};
void dropout_forward(const DropoutMask& m, int batch, const float* x, float* y, cudaStream_t stream);
void dropout_backward(const DropoutMask& m, int batch, const float* dy, float* dx, bool accumulate,
                      cudaStream_t stream);

// `rows` rows of `row_len` floats: dst[r * dst_stride + i] (+)= src[r * src_stride + i].
// Concat forward (each input into its channel range of every sample) and backward.
void copy_rows(float* dst, int64_t dst_stride, const float* src, int64_t src_stride, int64_t row_len,
               int64_t rows, bool accumulate, cudaStream_t stream);

// y[n, c, :] += b[c] over `spatial` values; db[c] = sum over n and spatial of dy[n, c, :]
// (overwritten).
void bias_add(float* y, const float* b, int batch, int channels, int64_t spatial, cudaStream_t stream);
void bias_grad(const float* dy, float* db, int batch, int channels, int64_t spatial, cudaStream_t stream);

// Explicit zero padding of `planes` h x w planes to (h + top + bottom) x (w + left + right),
// and its adjoint: the interior of the padded planes back into h x w.
struct PadSpec {
  int h = 0, w = 0;
  int top = 0, bottom = 0, left = 0, right = 0;
  int padded_h() const { return h + top + bottom; }
  int padded_w() const { return w + left + right; }
};
void pad_planes(const PadSpec& p, int64_t planes, const float* x, float* xp, cudaStream_t stream);
void crop_planes(const PadSpec& p, int64_t planes, const float* xp, float* x, bool accumulate,
                 cudaStream_t stream);

// The casts around a bf16 or fp16 convolution or fully connected layer (CudnnOptions::precision):
// `count` floats into `t` (DType::bf16 or DType::f16, 2 bytes each), rounded to nearest even
// (fp16: beyond 65504 to inf, which loss scaling then finds); and back to float, written or,
// with `accumulate`, added into dst. Any other `t` throws std::invalid_argument.
void narrow(DType t, const float* src, void* dst, int64_t count, cudaStream_t stream);
void widen(DType t, const void* src, float* dst, int64_t count, bool accumulate, cudaStream_t stream);

// A pooling window over `planes` (batch x channels) planes: output (oy, ox) covers input rows
// oy * stride_h - pad_top + [0, kh) and columns ox * stride_w - pad_left + [0, kw); only taps
// inside the image count (bottom/right padding is implied by out_h/out_w).
struct PoolGeometry {
  int in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int kh = 1, kw = 1, stride_h = 1, stride_w = 1, pad_top = 0, pad_left = 0;
};
// Max: the first tap in row-major window order wins ties; argmax holds its offset in the plane
// (nullptr: not kept, for a forward without backward).
void max_pool_forward(const PoolGeometry& g, int64_t planes, const float* x, float* y, int32_t* argmax,
                      cudaStream_t stream);
void max_pool_backward(const PoolGeometry& g, int64_t planes, const float* dy, const int32_t* argmax,
                       float* dx, bool accumulate, cudaStream_t stream);
// Average: divided by kh * kw, or with exclude_padding by the taps inside the image.
void avg_pool_forward(const PoolGeometry& g, bool exclude_padding, int64_t planes, const float* x, float* y,
                      cudaStream_t stream);
void avg_pool_backward(const PoolGeometry& g, bool exclude_padding, int64_t planes, const float* dy,
                       float* dx, bool accumulate, cudaStream_t stream);

// Batch norm backward after an inference forward (the statistics are the running ones, constants):
// dgamma = sum(dy * xhat), dbeta = sum(dy) (overwritten), dx (+)= gamma * invstd * dy, with
// xhat = (x - running_mean) * invstd and invstd = 1 / sqrt(running_var + eps).
void bn_backward_global(const float* x, const float* dy, const float* gamma, const float* running_mean,
                        const float* running_var, double eps, int batch, int channels, int64_t spatial,
                        float* dx, float* dgamma, float* dbeta, bool accumulate, cudaStream_t stream);
// Running statistics when each channel has a single value per batch (batch 1, 1 x 1): the
// unbiased variance is undefined; like the reference, use the biased one (0):
// mean = (1 - momentum) * mean + momentum * batch_mean, var = (1 - momentum) * var.
void bn_running_single(const float* batch_mean, float* running_mean, float* running_var, int channels,
                       float momentum, cudaStream_t stream);

}  // namespace ringbench::models::gpu
