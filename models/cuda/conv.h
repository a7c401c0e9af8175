// One convolution layer of the CUDA backend: its cuDNN descriptors and the algorithms it runs
// forward, backward-data and backward-filter, chosen once when the network is built.
//
// Padding: cuDNN pads symmetrically (pad_h above and below). A layer with asymmetric pads
// (top != bottom or left != right) pads its input explicitly into scratch memory and convolves
// that without padding; its data gradient is computed for the padded input and cropped back.
//
// bf16 and fp16 (ConvSettings::data; CudnnOptions::precision): the network's activations and
// weights stay fp32; each call casts its inputs into 2-byte copies in ConvScratch::half, runs
// cuDNN on those (fp32 accumulation: the descriptor's compute type CUDNN_DATA_FLOAT; tensor-op
// math where cuDNN offers it) and casts the result back into the fp32 buffer. An explicit pad is
// done in fp32 first and the padded tensor cast; a padded data gradient is cast back into the
// fp32 pad scratch and cropped from there.
#pragma once

#include <cudnn.h>

#include <array>
#include <cstddef>
#include <map>
#include <string>

#include "collectives/dtype.h"
#include "models/cuda/cudnn_util.h"
#include "models/cuda/layer_kernels.h"
#include "models/graph.h"

namespace ringbench::models::gpu {

struct ConvAlgos {
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  cudnnMathType_t fwd_math{}, bwd_data_math{}, bwd_filter_math{};
  size_t fwd_bytes = 0, bwd_data_bytes = 0, bwd_filter_bytes = 0;  // workspace each needs
};

// Algorithms chosen so far, per shape (batch, input as convolved, output, kernel, stride,
// padding, groups, math mode, measured or not, data type): layers of equal shape reuse one choice.
using ConvShapeKey = std::array<int, 17>;
using ConvAlgoCache = std::map<ConvShapeKey, ConvAlgos>;

struct ConvSettings {
  bool allow_tf32 = false;     // else CUDNN_FMA_MATH: true fp32 (see cudnn_network.cc)
  size_t workspace_limit = 0;  // bytes an algorithm may use
  bool measure = false;        // time the algorithms (cudnnFind*), else cuDNN's heuristics' order
  bool forward_only = false;   // an inference-only network: no backward algorithms (nor their workspace)
  DType data = DType::f32;     // bf16 or f16: computed on 2-byte copies (see the top of this file)
};

// What a call needs besides its tensors: the stream, the shared workspace, scratch for an
// explicitly padded input (pad_floats() floats) and, computing in bf16 or fp16, for the 2-byte
// copies of its tensors (half_bytes() bytes, 256-byte aligned).
struct ConvScratch {
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  float* pad = nullptr;
  void* half = nullptr;
};

// Bytes rounded up to a multiple of 256: where each 2-byte tensor in the half scratch starts
// (cuDNN's and cuBLAS's tensor-op kernels want aligned operands).
inline size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

class ConvLayer {
 public:
  ConvLayer(cudnnHandle_t handle, const std::string& name, const ConvSpec& spec, const Dims& in, const Dims& out,
            int batch, const ConvSettings& settings, ConvAlgoCache& cache);

  size_t workspace_bytes() const;  // the most any of its three calls needs
  size_t pad_floats() const { return asymmetric_ ? x_count() : 0; }
  // The 2-byte copies a call needs at once: [x or dx | w or dw | y or dy] (0 computing in fp32).
  size_t half_bytes() const { return data_ == DType::f32 ? 0 : half_y_at() + align256(y_count() * 2); }
  // "conv 3x3/2 g1 32x112x112 -> 64x56x56 (padded) bf16 fwd=IMPLICIT_PRECOMP_GEMM(tensor op) ..."
  std::string summary() const;

  // Queue on the stream set on `handle`. y, dw: overwritten; dx: accumulated into or overwritten.
  // The backward calls need a layer built without ConvSettings::forward_only.
  void forward(cudnnHandle_t handle, cudaStream_t stream, const ConvScratch& s, const float* x, const float* w,
               float* y) const;
  void backward_data(cudnnHandle_t handle, cudaStream_t stream, const ConvScratch& s, const float* w, const float* dy,
                     float* dx, bool accumulate) const;
  void backward_filter(cudnnHandle_t handle, cudaStream_t stream, const ConvScratch& s, const float* x,
                       const float* dy, float* dw) const;

 private:
  void choose_algorithms(cudnnHandle_t handle, const std::string& name, const ConvSettings& settings);
  // Elements of the input as convolved (padded when asymmetric_), of the weights, of the output.
  size_t x_count() const;
  size_t w_count() const;
  size_t y_count() const;
  // Where the weights' and the output's 2-byte copies start in ConvScratch::half.
  size_t half_w_at() const { return align256(x_count() * 2); }
  size_t half_y_at() const { return half_w_at() + align256(w_count() * 2); }
  // The input as convolved, for forward and backward_filter: x itself, or padded into s.pad;
  // computing in bf16/fp16, cast into the half scratch (the returned pointer's type is data_'s).
  const void* convolved_input(cudaStream_t stream, const ConvScratch& s, const float* x) const;
  void backward_data_half(cudnnHandle_t handle, cudaStream_t stream, const ConvScratch& s, const float* w,
                          const float* dy, float* dx, bool accumulate) const;
  void* half_at(const ConvScratch& s, size_t offset) const { return static_cast<char*>(s.half) + offset; }

  int batch_, in_c_;
  bool forward_only_;
  DType data_;
  ConvSpec spec_;
  Dims in_, out_;
  bool asymmetric_;
  PadSpec pad_;          // asymmetric_: the explicit padding
  TensorDesc x_desc_;    // the input as convolved (padded when asymmetric_)
  TensorDesc y_desc_;
  FilterDesc w_desc_;
  ConvDesc fwd_conv_, bwd_data_conv_, bwd_filter_conv_;  // one per direction: math types may differ
  ConvAlgos algos_;
};

}  // namespace ringbench::models::gpu
