// One convolution layer of the CUDA backend: its cuDNN descriptors and the algorithms it runs
// forward, backward-data and backward-filter, chosen once when the network is built.
//
// Padding: cuDNN pads symmetrically (pad_h above and below). A layer with asymmetric pads
// (top != bottom or left != right) pads its input explicitly into scratch memory and convolves
// that without padding; its data gradient is computed for the padded input and cropped back.
#pragma once

#include <cudnn.h>

#include <array>
#include <cstddef>
#include <map>
#include <string>

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
// padding, groups, math mode): layers of equal shape reuse one choice.
using ConvShapeKey = std::array<int, 16>;
using ConvAlgoCache = std::map<ConvShapeKey, ConvAlgos>;

struct ConvSettings {
  bool allow_tf32 = false;     // else CUDNN_FMA_MATH: true fp32 (see cudnn_network.cc)
  size_t workspace_limit = 0;  // bytes an algorithm may use
  bool measure = false;        // time the algorithms (cudnnFind*), else cuDNN's heuristics' order
  bool forward_only = false;   // an inference-only network: no backward algorithms (nor their workspace)
};

// What a call needs besides its tensors: the stream, the shared workspace, and scratch for an
// explicitly padded input (pad_floats() floats).
struct ConvScratch {
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  float* pad = nullptr;
};

class ConvLayer {
 public:
  ConvLayer(cudnnHandle_t handle, const std::string& name, const ConvSpec& spec, const Dims& in, const Dims& out,
            int batch, const ConvSettings& settings, ConvAlgoCache& cache);

  size_t workspace_bytes() const;  // the most any of its three calls needs
  size_t pad_floats() const {
    return asymmetric_ ? size_t(batch_) * size_t(in_c_) * size_t(pad_.padded_h()) * size_t(pad_.padded_w()) : 0;
  }
  // "conv 3x3/2 g1 32x112x112 -> 64x56x56 (padded) fwd=IMPLICIT_PRECOMP_GEMM bwd_data=ALGO_1 bwd_filter=ALGO_1"
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

  int batch_, in_c_;
  bool forward_only_;
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
