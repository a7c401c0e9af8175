#include "models/cuda/conv.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "base/errors.h"

namespace ringbench::models::gpu {
namespace {

const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
  }
}

const char* algo_name(cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
  }
}

const char* algo_name(cudnnConvolutionBwdFilterAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING: return "FFT_TILING";
    default: return "?";
  }
}

std::string math_suffix(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ? "(tensor op)" : "";
}

// Tensor-op math may be used: TF32 allowed, or 2-byte data (fp32 accumulation either way).
bool tensor_ops_allowed(const ConvSettings& s) { return s.allow_tf32 || s.data != DType::f32; }

cudnnDataType_t cudnn_type(DType t) {
  return t == DType::bf16 ? CUDNN_DATA_BFLOAT16 : t == DType::f16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

// Accumulation in fp32 in every data type (CUDNN_DATA_FLOAT: cuDNN's "pseudo half" configurations).
ConvDesc make_conv_desc(const ConvSpec& s, int pad_h, int pad_w, cudnnMathType_t math) {
  ConvDesc d;
  RB_CUDA(cudnnSetConvolution2dDescriptor(d, pad_h, pad_w, s.stride_h, s.stride_w, 1, 1, CUDNN_CROSS_CORRELATION,
                                          CUDNN_DATA_FLOAT));
  RB_CUDA(cudnnSetConvolutionGroupCount(d, s.groups));
  RB_CUDA(cudnnSetConvolutionMathType(d, math));
  return d;
}

// The first (= fastest as measured by cudnnFind*, or by cuDNN's heuristics; both sort them) of the candidates that is
// supported, keeps to the math mode and whose workspace fits. With TF32 allowed or 2-byte data
// the descriptor takes the candidate's math type (as PyTorch does: tensor ops where cuDNN has
// them); else it stays CUDNN_FMA_MATH.
// `workspace(algo, &bytes)` asks cuDNN for the workspace with the descriptor as set.
template <class Perf, class Algo, class Workspace>
void pick(const char* direction, const std::string& layer, const std::vector<Perf>& perf, int returned,
          const ConvSettings& settings, cudnnConvolutionDescriptor_t conv, Workspace workspace, Algo& algo,
          cudnnMathType_t& math, size_t& bytes) {
  for (int i = 0; i < returned; ++i) {
    const Perf& p = perf[size_t(i)];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > settings.workspace_limit) continue;
    const bool fp32 = p.mathType == CUDNN_FMA_MATH || p.mathType == CUDNN_DEFAULT_MATH;
    const bool tensor_ops = tensor_ops_allowed(settings);
    if (!tensor_ops && !fp32) continue;
    const cudnnMathType_t m = tensor_ops ? p.mathType : CUDNN_FMA_MATH;
    RB_CUDA(cudnnSetConvolutionMathType(conv, m));
    size_t need = 0;
    if (workspace(p.algo, &need) != CUDNN_STATUS_SUCCESS || need > settings.workspace_limit) continue;
    algo = p.algo;
    math = m;
    bytes = std::max(need, p.memory);
    return;
  }
  throw Error("cudnn network: layer '" + layer + "': cuDNN offers no " + direction + " convolution algorithm " +
                           (settings.data == DType::f32 ? "" : std::string("on ") + dtype_short_name(settings.data) + " data ") +
                           "that " + (tensor_ops_allowed(settings) ? "" : "computes in fp32 (CUDNN_FMA_MATH) and ") +
                           "needs at most " +
                           std::to_string(settings.workspace_limit >> 20) + " MiB of workspace (" +
                           std::to_string(returned) + " candidates)");
}

}  // namespace

ConvLayer::ConvLayer(cudnnHandle_t handle, const std::string& name, const ConvSpec& spec, const Dims& in,
                     const Dims& out, int batch, const ConvSettings& settings, ConvAlgoCache& cache)
    : batch_(batch),
      in_c_(in.c),
      forward_only_(settings.forward_only),
      data_(settings.data),
      spec_(spec),
      in_(in),
      out_(out) {
  const Pads& p = spec.pad;
  asymmetric_ = p.top != p.bottom || p.left != p.right;
  pad_ = {in.h, in.w, p.top, p.bottom, p.left, p.right};
  const int xh = asymmetric_ ? pad_.padded_h() : in.h, xw = asymmetric_ ? pad_.padded_w() : in.w;
  const int pad_h = asymmetric_ ? 0 : p.top, pad_w = asymmetric_ ? 0 : p.left;
  const cudnnDataType_t type = cudnn_type(data_);
  x_desc_ = nchw_desc(batch, in.c, xh, xw, type);
  y_desc_ = nchw_desc(batch, out.c, out.h, out.w, type);
  // OIHW with I = in / groups: the flat parameter buffer's layout.
  RB_CUDA(cudnnSetFilter4dDescriptor(w_desc_, type, CUDNN_TENSOR_NCHW, spec.out_channels, in.c / spec.groups, spec.kh,
                                     spec.kw));
  const cudnnMathType_t math = data_ != DType::f32 ? CUDNN_TENSOR_OP_MATH
                               : settings.allow_tf32 ? CUDNN_DEFAULT_MATH
                                                     : CUDNN_FMA_MATH;
  fwd_conv_ = make_conv_desc(spec, pad_h, pad_w, math);
  bwd_data_conv_ = make_conv_desc(spec, pad_h, pad_w, math);
  bwd_filter_conv_ = make_conv_desc(spec, pad_h, pad_w, math);

  int n = 0, c = 0, h = 0, w = 0;
  RB_CUDA(cudnnGetConvolution2dForwardOutputDim(fwd_conv_, x_desc_, w_desc_, &n, &c, &h, &w));
  if (n != batch || c != out.c || h != out.h || w != out.w)
    throw std::logic_error("cudnn network: layer '" + name + "': cuDNN computes an output of " + std::to_string(c) +
                           "x" + std::to_string(h) + "x" + std::to_string(w) + ", the graph says " + to_string(out));

  const ConvShapeKey key{batch,          in.c,         xh,          xw,    out.c, out.h, out.w, spec.kh, spec.kw,
                         spec.stride_h, spec.stride_w, pad_h,       pad_w, spec.groups, settings.allow_tf32 ? 1 : 0,
                         settings.measure ? 1 : 0,  int(data_)};
  if (auto it = cache.find(key); it != cache.end()) {
    algos_ = it->second;
    RB_CUDA(cudnnSetConvolutionMathType(fwd_conv_, algos_.fwd_math));
    RB_CUDA(cudnnSetConvolutionMathType(bwd_data_conv_, algos_.bwd_data_math));
    RB_CUDA(cudnnSetConvolutionMathType(bwd_filter_conv_, algos_.bwd_filter_math));
    return;
  }
  choose_algorithms(handle, name, settings);
  cache.emplace(key, algos_);
}

void ConvLayer::choose_algorithms(cudnnHandle_t handle, const std::string& name, const ConvSettings& settings) {
  int max_count = 0, got = 0;

  RB_CUDA(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(size_t(std::max(max_count, 1)));
  if (settings.measure)
    RB_CUDA(cudnnFindConvolutionForwardAlgorithm(handle, x_desc_, w_desc_, fwd_conv_, y_desc_, max_count, &got,
                                                 fwd.data()));
  else
    RB_CUDA(cudnnGetConvolutionForwardAlgorithm_v7(handle, x_desc_, w_desc_, fwd_conv_, y_desc_, max_count, &got,
                                                   fwd.data()));
  pick("forward", name, fwd, got, settings, fwd_conv_,
       [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
         return cudnnGetConvolutionForwardWorkspaceSize(handle, x_desc_, w_desc_, fwd_conv_, y_desc_, a, bytes);
       },
       algos_.fwd, algos_.fwd_math, algos_.fwd_bytes);
  if (forward_only_) return;  // bwd_* stay zero: no backward workspace

  RB_CUDA(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> data(size_t(std::max(max_count, 1)));
  if (settings.measure)
    RB_CUDA(cudnnFindConvolutionBackwardDataAlgorithm(handle, w_desc_, y_desc_, bwd_data_conv_, x_desc_, max_count,
                                                      &got, data.data()));
  else
    RB_CUDA(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w_desc_, y_desc_, bwd_data_conv_, x_desc_,
                                                        max_count, &got, data.data()));
  pick("backward-data", name, data, got, settings, bwd_data_conv_,
       [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
         return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, w_desc_, y_desc_, bwd_data_conv_, x_desc_, a,
                                                             bytes);
       },
       algos_.bwd_data, algos_.bwd_data_math, algos_.bwd_data_bytes);

  RB_CUDA(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> filter(size_t(std::max(max_count, 1)));
  if (settings.measure)
    RB_CUDA(cudnnFindConvolutionBackwardFilterAlgorithm(handle, x_desc_, y_desc_, bwd_filter_conv_, w_desc_,
                                                        max_count, &got, filter.data()));
  else
    RB_CUDA(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x_desc_, y_desc_, bwd_filter_conv_, w_desc_,
                                                          max_count, &got, filter.data()));
  pick("backward-filter", name, filter, got, settings, bwd_filter_conv_,
       [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
         return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, x_desc_, y_desc_, bwd_filter_conv_, w_desc_,
                                                               a, bytes);
       },
       algos_.bwd_filter, algos_.bwd_filter_math, algos_.bwd_filter_bytes);
}

size_t ConvLayer::workspace_bytes() const {
  return std::max({algos_.fwd_bytes, algos_.bwd_data_bytes, algos_.bwd_filter_bytes});
}

std::string ConvLayer::summary() const {
  // Appends, not "literal" + std::string: GCC 12 misreports the latter (-Wrestrict).
  const ConvSpec& s = spec_;
  std::string r = "conv ";
  r += std::to_string(s.kh);
  r += 'x';
  r += std::to_string(s.kw);
  r += '/';
  r += std::to_string(s.stride_h);
  if (s.stride_w != s.stride_h) {
    r += 'x';
    r += std::to_string(s.stride_w);
  }
  r += " g";
  r += std::to_string(s.groups);
  r += ' ';
  r += to_string(in_);
  r += "->";
  r += to_string(out_);
  if (asymmetric_) r += " (padded explicitly)";
  if (data_ != DType::f32) {
    r += ' ';
    r += dtype_short_name(data_);
  }
  r += " fwd=";
  r += algo_name(algos_.fwd);
  r += math_suffix(algos_.fwd_math);
  if (forward_only_) return r;
  r += " bwd_data=";
  r += algo_name(algos_.bwd_data);
  r += math_suffix(algos_.bwd_data_math);
  r += " bwd_filter=";
  r += algo_name(algos_.bwd_filter);
  r += math_suffix(algos_.bwd_filter_math);
  return r;
}

size_t ConvLayer::x_count() const {
  const int h = asymmetric_ ? pad_.padded_h() : in_.h, w = asymmetric_ ? pad_.padded_w() : in_.w;
  return size_t(batch_) * size_t(in_c_) * size_t(h) * size_t(w);
}
size_t ConvLayer::w_count() const {
  return size_t(spec_.out_channels) * size_t(in_c_ / spec_.groups) * size_t(spec_.kh) * size_t(spec_.kw);
}
size_t ConvLayer::y_count() const { return size_t(batch_) * size_t(out_.numel()); }

const void* ConvLayer::convolved_input(cudaStream_t stream, const ConvScratch& s, const float* x) const {
  const float* in = x;
  if (asymmetric_) {
    pad_planes(pad_, int64_t(batch_) * in_c_, x, s.pad, stream);
    in = s.pad;
  }
  if (data_ == DType::f32) return in;
  narrow(data_, in, half_at(s, 0), int64_t(x_count()), stream);
  return half_at(s, 0);
}

void ConvLayer::forward(cudnnHandle_t handle, cudaStream_t stream, const ConvScratch& s, const float* x,
                        const float* w, float* y) const {
  const void* in = convolved_input(stream, s, x);
  if (data_ == DType::f32) {
    RB_CUDA(cudnnConvolutionForward(handle, &kOne, x_desc_, in, w_desc_, w, fwd_conv_, algos_.fwd, s.workspace,
                                    s.workspace_bytes, &kZero, y_desc_, y));
    return;
  }
  void* wh = half_at(s, half_w_at());
  void* yh = half_at(s, half_y_at());
  narrow(data_, w, wh, int64_t(w_count()), stream);
  RB_CUDA(cudnnConvolutionForward(handle, &kOne, x_desc_, in, w_desc_, wh, fwd_conv_, algos_.fwd, s.workspace,
                                  s.workspace_bytes, &kZero, y_desc_, yh));
  widen(data_, yh, y, int64_t(y_count()), false, stream);
}

void ConvLayer::backward_data(cudnnHandle_t handle, cudaStream_t stream, const ConvScratch& s, const float* w,
                              const float* dy, float* dx, bool accumulate) const {
  if (data_ != DType::f32) {
    backward_data_half(handle, stream, s, w, dy, dx, accumulate);
    return;
  }
  if (!asymmetric_) {
    RB_CUDA(cudnnConvolutionBackwardData(handle, &kOne, w_desc_, w, y_desc_, dy, bwd_data_conv_, algos_.bwd_data,
                                         s.workspace, s.workspace_bytes, blend(accumulate), x_desc_, dx));
    return;
  }
  // The gradient of the padded input, then its interior.
  RB_CUDA(cudnnConvolutionBackwardData(handle, &kOne, w_desc_, w, y_desc_, dy, bwd_data_conv_, algos_.bwd_data,
                                       s.workspace, s.workspace_bytes, &kZero, x_desc_, s.pad));
  crop_planes(pad_, int64_t(batch_) * in_c_, s.pad, dx, accumulate, stream);
}

// On 2-byte copies of w and dy into a 2-byte dx (of the padded input when asymmetric_), cast
// back into dx (or the fp32 pad scratch, then cropped).
void ConvLayer::backward_data_half(cudnnHandle_t handle, cudaStream_t stream, const ConvScratch& s, const float* w,
                                   const float* dy, float* dx, bool accumulate) const {
  void* dxh = half_at(s, 0);
  void* wh = half_at(s, half_w_at());
  void* dyh = half_at(s, half_y_at());
  narrow(data_, w, wh, int64_t(w_count()), stream);
  narrow(data_, dy, dyh, int64_t(y_count()), stream);
  RB_CUDA(cudnnConvolutionBackwardData(handle, &kOne, w_desc_, wh, y_desc_, dyh, bwd_data_conv_, algos_.bwd_data,
                                       s.workspace, s.workspace_bytes, &kZero, x_desc_, dxh));
  if (!asymmetric_) {
    widen(data_, dxh, dx, int64_t(x_count()), accumulate, stream);
    return;
  }
  widen(data_, dxh, s.pad, int64_t(x_count()), false, stream);
  crop_planes(pad_, int64_t(batch_) * in_c_, s.pad, dx, accumulate, stream);
}

void ConvLayer::backward_filter(cudnnHandle_t handle, cudaStream_t stream, const ConvScratch& s, const float* x,
                                const float* dy, float* dw) const {
  // (With asymmetric pads the scratch held the data gradient just before: pad again.)
  const void* in = convolved_input(stream, s, x);
  if (data_ == DType::f32) {
    RB_CUDA(cudnnConvolutionBackwardFilter(handle, &kOne, x_desc_, in, y_desc_, dy, bwd_filter_conv_,
                                           algos_.bwd_filter, s.workspace, s.workspace_bytes, &kZero, w_desc_, dw));
    return;
  }
  void* dwh = half_at(s, half_w_at());
  void* dyh = half_at(s, half_y_at());
  narrow(data_, dy, dyh, int64_t(y_count()), stream);
  RB_CUDA(cudnnConvolutionBackwardFilter(handle, &kOne, x_desc_, in, y_desc_, dyh, bwd_filter_conv_,
                                         algos_.bwd_filter, s.workspace, s.workspace_bytes, &kZero, w_desc_, dwh));
  widen(data_, dwh, dw, int64_t(w_count()), false, stream);
}

}  // namespace ringbench::models::gpu
