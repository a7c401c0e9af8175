// The CUDA backend ("cudnn"): every node's activation and gradient in its own NCHW float32
// device buffer, convolutions, batch norm, ReLU and (symmetric) average pooling through cuDNN,
// fully connected layers through cuBLAS, and the rest through our kernels (layer_kernels.cu).
// It computes what the reference backend computes (ref_network.cc, the tests' oracle). Where
// cuDNN cannot: max pooling (cuDNN gives a tied window's gradient to any one tap, the reference
// to the first; windows of zeros tie after every ReLU), pooling and convolution with asymmetric
// pads (cuDNN pads symmetrically; convolutions then pad their input explicitly, conv.h), batch
// norm's backward after an inference forward (cuDNN's always differentiates batch statistics)
// and dropout's mask (models::dropout_keep()'s hash, ported).
//
// Why cuDNN's legacy API and not its graph API (or the cudnn-frontend headers on top of it):
// each of our layers maps 1:1 onto one legacy call per direction (cudnnConvolutionForward /
// BackwardData / BackwardFilter with a group count, cudnnBatchNormalization*, pooling,
// activation), the algorithms are found once per shape from cuDNN's heuristics
// (cudnnGetConvolution*Algorithm_v7; the unversioned getters are gone in cuDNN 9) and kept, and
// we need no extra header-only dependency or per-graph engine/plan caching. We fuse nothing, so
// the graph API's fusions would not be used. cuDNN 9 still ships the legacy API (deprecated:
// it only warns with CUDNN_WARN_DEPRECATED).
//
// Math: by default convolutions use CUDNN_FMA_MATH and cuBLAS CUBLAS_DEFAULT_MATH, i.e. true
// fp32. (cuDNN's CUDNN_DEFAULT_MATH lets fp32 convolutions run in TF32 on Ampere and later,
// with a 10-bit mantissa: errors of ~1e-3, which the fp32 comparison against the reference
// could not tell from bugs.) RINGBENCH_CUDNN_TF32=1 (make_network) or CudnnOptions::allow_tf32
// allows TF32 in both, for speed; describe() says which.
//
// Execution: one compute stream owned by the network; forward() and backward() only queue work
// on it (the cuDNN and cuBLAS handles are bound to it) and never synchronize, except where a
// caller asked for something on the host: a DeviceGate checkpoint (the layer's work must have
// run within the slice: synchronize, then checkpoint) and a LayerTrace (a layer's wall time on
// a GPU needs the stream drained before and after it, so tracing synchronizes around every
// layer; without a trace nothing is timed). on_param_grads(node) is called as soon as the
// node's gradient work is queued; the caller records an event on stream().
//
// Gradients: the first consumer of a node in backward order (or the output gradient) writes the
// node's gradient, later ones add into it (cuDNN's beta = 1, cuBLAS's beta = 1, our kernels'
// `accumulate`). The network input's gradient (tests only) is computed on demand by
// get_input_grad() unless a batch norm reads the input (its one call yields both gradients).
//
// Memory: every device buffer is a cuda::DeviceArray, counted against DeviceMemory (a
// vGPU profile's cap); one workspace, sized at construction to the largest need, is shared by
// all cuDNN calls, cuBLAS (cublasSetWorkspace) and the explicit padding of convolutions with
// asymmetric pads. Nothing is allocated in forward or backward. (Not counted: the memory the
// CUDA context and the cuDNN/cuBLAS handles allocate for themselves.)
#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cuda/check.h"
#include "cuda/memory.h"
#include "models/backends.h"
#include "models/cuda/conv.h"
#include "models/cuda/cudnn_util.h"
#include "models/cuda/layer_kernels.h"
#include "base/device_memory.h"
#include "base/errors.h"

namespace ringbench::models {
namespace {

using Clock = std::chrono::steady_clock;
using cuda::DeviceArray;

constexpr size_t kMaxConvWorkspace = size_t(256) << 20;  // bytes any one convolution algorithm may use

struct CudnnDestroy {
  void operator()(cudnnHandle_t h) const { cudnnDestroy(h); }
};
struct CublasDestroy {
  void operator()(cublasHandle_t h) const { cublasDestroy(h); }
};

bool symmetric(const Pads& p) { return p.top == p.bottom && p.left == p.right; }

int checked_int(int64_t v, const std::string& what) {
  if (v > INT_MAX)
    throw std::invalid_argument("cudnn network: " + what + " (" + std::to_string(v) + ") exceeds INT_MAX");
  return int(v);
}

class CudnnNetwork final : public Network {
 public:
  CudnnNetwork(const Graph& g, int batch, const CudnnOptions& options);
  ~CudnnNetwork() override {
    cuda::sync_quietly(stream_.get());  // queued work may still use the buffers
    cublas_.reset();  // before its workspace goes
    cudnn_.reset();
  }

  const Graph& graph() const override { return g_; }
  int batch() const override { return batch_; }
  std::string backend() const override { return "cudnn"; }
  std::string describe() const override;
  bool on_device() const override { return true; }
  void* stream() const override { return stream_.get(); }

  void bind(float* params, float* grads, float* state) override;
  void set_input(const float* x) override;
  void forward(const ForwardArgs& args) override;
  void get_output(size_t i, float* y) override;
  void set_output_grad(size_t i, const float* dy) override;
  void backward(const std::function<void(int node)>& on_param_grads) override;
  void get_input_grad(float* dx) override;

 private:
  struct NodeData {
    DeviceArray<float> y, dy;  // batch x out dims, NCHW
    gpu::TensorDesc desc;      // of y and dy
    std::unique_ptr<gpu::ConvLayer> conv;
    gpu::TensorDesc bn_desc;                      // 1 x C x 1 x 1
    DeviceArray<float> bn_mean, bn_invstd;        // saved by a training forward for backward
    DeviceArray<int32_t> argmax;                  // max pooling's winners
    gpu::PoolGeometry pool;
    std::unique_ptr<gpu::PoolDesc> cudnn_pool;    // average pooling with symmetric pads
  };
  // backward() computes everything but what feeds only the deferred input gradient, which
  // get_input_grad() computes.
  enum class Pass { backward, input_grad };

  void setup_node(int id, const gpu::ConvSettings& conv_settings);
  void note(const std::string& what);
  size_t workspace_limit() const;

  void forward_node(int id);
  void backward_node(int id, Pass pass);
  void seed_output_grads();
  bool computes_grad_of(int p, Pass pass) const {
    return pass == Pass::backward ? !(p == 0 && defer_input_grad_) : p == 0;
  }
  bool accumulates(int p, int consumer, int slot) const { return first_slot_[p] != std::pair{consumer, slot}; }

  const float* param(int id, size_t k) const { return params_ + g_.params[g_.nodes[id].params.at(k)].offset; }
  float* grad(int id, size_t k) const { return grads_ + g_.params[g_.nodes[id].params.at(k)].offset; }
  float* running(int id) const { return state_ + g_.state.at(size_t(g_.nodes[id].state)).offset; }
  int64_t count(int id) const { return int64_t(batch_) * g_.nodes[id].out.numel(); }
  double bn_eps(int id) const { return std::max(double(g_.nodes[id].bn.eps), CUDNN_BN_MIN_EPSILON); }
  gpu::ConvScratch scratch() const { return {workspace_.data() + pad_bytes_, library_bytes_, pad_}; }
  cudaStream_t strm() const { return stream_.get(); }

  Graph g_;
  int batch_;
  CudnnOptions options_;
  cuda::Stream stream_;
  std::unique_ptr<cudnnContext, CudnnDestroy> cudnn_;
  std::unique_ptr<cublasContext, CublasDestroy> cublas_;
  gpu::ActivationDesc relu_;

  std::vector<NodeData> nodes_;
  std::vector<std::pair<int, int>> first_slot_;  // per node: the (consumer, input slot) that writes its gradient first
  bool defer_input_grad_ = false, has_deferred_ = false;
  std::vector<DeviceArray<float>> out_dy_;  // per output: the gradient set_output_grad() staged
  std::vector<bool> out_dy_set_;

  gpu::ConvAlgoCache algo_cache_;
  DeviceArray<char> workspace_;  // [padded-input scratch | cuDNN and cuBLAS workspace]
  size_t pad_bytes_ = 0, library_bytes_ = 0;
  float* pad_ = nullptr;
  std::vector<std::pair<std::string, int>> impls_;  // describe(): what runs each layer, and how often

  float* params_ = nullptr;
  float* grads_ = nullptr;
  float* state_ = nullptr;
  ForwardArgs args_;  // of the last forward (dropout's backward recomputes its mask)
  bool bound_ = false, forwarded_ = false, backwarded_ = false, input_grad_ready_ = false;
};

// ---------------------------------------------------------------------------------------------
// Setup

CudnnNetwork::CudnnNetwork(const Graph& g, int batch, const CudnnOptions& options)
    : g_(g), batch_(batch), options_(options) {
  check_network_args(g_, batch, "cudnn network");
  const int n = int(g_.nodes.size());

  // Who writes each node's gradient first in backward order (backends.h); everyone else accumulates.
  GradientWriters writers = plan_gradient_writers(g_);
  first_slot_ = std::move(writers.first_slot);
  defer_input_grad_ = writers.defer_input_grad;
  has_deferred_ = writers.input_consumed && defer_input_grad_;

  cudnnHandle_t dnn = nullptr;
  RB_CUDA(cudnnCreate(&dnn));
  cudnn_.reset(dnn);
  RB_CUDA(cudnnSetStream(dnn, strm()));
  cublasHandle_t blas = nullptr;
  RB_CUDA(cublasCreate(&blas));
  cublas_.reset(blas);
  RB_CUDA(cublasSetStream(blas, strm()));
  RB_CUDA(cublasSetMathMode(blas, options_.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  RB_CUDA(cudnnSetActivationDescriptor(relu_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));

  // Activations and gradients first, so the workspace limit sees what is left.
  nodes_.resize(size_t(n));
  for (int id = 0; id < n; ++id) {
    const Dims& d = g_.nodes[id].out;
    NodeData& nd = nodes_[id];
    nd.y = DeviceArray<float>(size_t(count(id)), "cudnn activations");
    nd.dy = DeviceArray<float>(size_t(count(id)), "cudnn activation gradients");
    nd.desc = gpu::nchw_desc(batch_, d.c, d.h, d.w);
    // Zero: a gradient no consumer writes (a dead end) must read as zero.
    RB_CUDA(cudaMemsetAsync(nd.y.data(), 0, nd.y.bytes(), strm()));
    RB_CUDA(cudaMemsetAsync(nd.dy.data(), 0, nd.dy.bytes(), strm()));
  }
  for (const Output& o : g_.outputs) out_dy_.emplace_back(size_t(count(o.node)), "cudnn output gradients");
  out_dy_set_.assign(g_.outputs.size(), false);

  const gpu::ConvSettings conv_settings{options_.allow_tf32, workspace_limit(), options_.measure_algos};
  size_t conv_bytes = 0, pad_floats = 0;
  for (int id = 1; id < n; ++id) {
    try {
      setup_node(id, conv_settings);
    } catch (const DeviceOutOfMemory&) {
      throw;  // a result ("does not fit" the framebuffer), not a failure: keep its type
    } catch (const std::exception& e) {
      const Node& node = g_.nodes[id];
      if (std::string(e.what()).find("cudnn network: layer") == 0) throw;
      throw Error("cudnn network: layer '" + node.name + "' (" + op_name(node.kind) + "): " + e.what());
    }
    if (const auto& conv = nodes_[id].conv) {
      conv_bytes = std::max(conv_bytes, conv->workspace_bytes());
      pad_floats = std::max(pad_floats, conv->pad_floats());
    }
  }

  // The one workspace. cuBLAS wants 4 MiB (32 MiB on Hopper and later) for its own use.
  int cc_major = 0, device = 0;
  RB_CUDA(cudaGetDevice(&device));
  RB_CUDA(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, device));
  const size_t cublas_bytes = size_t(cc_major >= 9 ? 32 : 4) << 20;
  pad_bytes_ = (pad_floats * sizeof(float) + 255) / 256 * 256;  // the library part stays 256-byte aligned
  library_bytes_ = std::max(conv_bytes, cublas_bytes);
  workspace_ = DeviceArray<char>(pad_bytes_ + library_bytes_, "cudnn workspace");
  pad_ = pad_bytes_ ? reinterpret_cast<float*>(workspace_.data()) : nullptr;
  RB_CUDA(cublasSetWorkspace(blas, workspace_.data() + pad_bytes_, library_bytes_));
  stream_.sync();
}

// What a convolution algorithm may use: at most kMaxConvWorkspace, a quarter of the GPU's free
// memory, and a quarter of what an emulated framebuffer cap leaves after the activations.
size_t CudnnNetwork::workspace_limit() const {
  size_t free_bytes = 0, total_bytes = 0;
  RB_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  size_t limit = std::min(kMaxConvWorkspace, free_bytes / 4);
  const DeviceMemory& dm = DeviceMemory::instance();
  if (dm.cap() > 0) limit = std::min(limit, dm.cap() > dm.in_use() ? (dm.cap() - dm.in_use()) / 4 : 0);
  return limit;
}

void CudnnNetwork::note(const std::string& what) {
  auto it = std::find_if(impls_.begin(), impls_.end(), [&](const auto& e) { return e.first == what; });
  if (it == impls_.end())
    impls_.emplace_back(what, 1);
  else
    ++it->second;
}

void CudnnNetwork::setup_node(int id, const gpu::ConvSettings& conv_settings) {
  const Node& n = g_.nodes[id];
  NodeData& nd = nodes_[id];
  const Dims& in = g_.nodes[n.inputs.at(0)].out;
  switch (n.kind) {
    case OpKind::input:
      throw std::invalid_argument("only node 0 may be an input");
    case OpKind::conv:
      nd.conv = std::make_unique<gpu::ConvLayer>(cudnn_.get(), n.name, n.conv, in, n.out, batch_, conv_settings,
                                                 algo_cache_);
      note(nd.conv->summary() + (n.conv.bias ? " +bias kernel" : ""));
      break;
    case OpKind::batch_norm:
      RB_CUDA(cudnnDeriveBNTensorDescriptor(nd.bn_desc, nodes_[n.inputs[0]].desc, CUDNN_BATCHNORM_SPATIAL));
      nd.bn_mean = DeviceArray<float>(size_t(n.out.c), "cudnn batch-norm statistics");
      nd.bn_invstd = DeviceArray<float>(size_t(n.out.c), "cudnn batch-norm statistics");
      note("bn cudnnBatchNormalization* spatial");
      break;
    case OpKind::relu:
      note("relu cudnnActivation");
      break;
    case OpKind::relu6:
      note("relu6 kernel");
      break;
    case OpKind::max_pool:
    case OpKind::avg_pool: {
      const PoolSpec& p = n.pool;
      nd.pool = {in.h, in.w, n.out.h, n.out.w, p.kh, p.kw, p.stride_h, p.stride_w, p.pad.top, p.pad.left};
      if (n.kind == OpKind::max_pool) {
        // Our kernel, not cuDNN's: the reference gives a tied window's gradient to its first
        // tap (ties are common after a ReLU: windows of zeros), cuDNN to any one of them.
        nd.argmax = DeviceArray<int32_t>(size_t(count(id)), "cudnn max-pool indices");
        note("maxpool kernel");
      } else if (symmetric(p.pad)) {
        nd.cudnn_pool = std::make_unique<gpu::PoolDesc>();
        RB_CUDA(cudnnSetPooling2dDescriptor(*nd.cudnn_pool,
                                            p.exclude_padding ? CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
                                                              : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                                            CUDNN_NOT_PROPAGATE_NAN, p.kh, p.kw, p.pad.top, p.pad.left, p.stride_h,
                                            p.stride_w));
        int on = 0, oc = 0, oh = 0, ow = 0;
        RB_CUDA(cudnnGetPooling2dForwardOutputDim(*nd.cudnn_pool, nodes_[n.inputs[0]].desc, &on, &oc, &oh, &ow));
        if (on != batch_ || oc != n.out.c || oh != n.out.h || ow != n.out.w)
          throw std::logic_error("cuDNN pools to " + std::to_string(oh) + "x" + std::to_string(ow) +
                                 ", the graph says " + to_string(n.out));
        note(std::string("avgpool cudnnPooling ") + (p.exclude_padding ? "exclude" : "include") + " padding");
      } else {  // cuDNN pads symmetrically only
        note(std::string("avgpool kernel (asymmetric pads) ") + (p.exclude_padding ? "exclude" : "include") +
             " padding");
      }
      break;
    }
    case OpKind::concat:
      note("concat kernel");
      break;
    case OpKind::fc:
      checked_int(in.numel(), "layer '" + n.name + "': fc input features");
      note(std::string("fc cublasSgemm") + (n.fc.bias ? " +bias kernel" : ""));
      break;
    case OpKind::dropout:
      note("dropout kernel");
      break;
  }
}

std::string CudnnNetwork::describe() const {
  const size_t v = cudnnGetVersion();
  std::string s = "cudnn (cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." +
                  std::to_string(v % 100) + ", " +
                  (options_.allow_tf32 ? "TF32 allowed (CUDNN_DEFAULT_MATH, CUBLAS_TF32_TENSOR_OP_MATH)"
                                       : "fp32 (CUDNN_FMA_MATH, CUBLAS_DEFAULT_MATH)") +
                  (options_.measure_algos ? ", conv algorithms measured (cudnnFind)" : ", conv algorithms by heuristics") +
                  ", workspace " + std::to_string((pad_bytes_ + library_bytes_ + (1 << 19)) >> 20) + " MiB)";
  return describe_impls(std::move(s), impls_);
}

// ---------------------------------------------------------------------------------------------
// Host interface

void CudnnNetwork::bind(float* params, float* grads, float* state) {
  check_bind_args(g_, params, grads, state, "cudnn network");
  const std::pair<const float*, const char*> buffers[] = {{params, "parameter"}, {grads, "gradient"}, {state, "state"}};
  for (const auto& [p, what] : buffers) {
    if (!p) continue;
    cudaPointerAttributes a{};
    const cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) cudaGetLastError();  // not sticky: clear it
    if (e != cudaSuccess || (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged))
      throw std::invalid_argument(std::string("cudnn network: bind() takes device pointers; the ") + what +
                                  " buffer is not device memory");
  }
  params_ = params;
  grads_ = grads;
  state_ = state;
  bound_ = true;
  forwarded_ = backwarded_ = false;  // saved activations refer to the previous buffers
}

void CudnnNetwork::set_input(const float* x) {
  RB_CUDA(cudaMemcpyAsync(nodes_[0].y.data(), x, nodes_[0].y.bytes(), cudaMemcpyHostToDevice, strm()));
  stream_.sync();
}

void CudnnNetwork::get_output(size_t i, float* y) {
  check_output_index(g_, i, "get_output()", "cudnn network");
  if (!forwarded_) throw std::logic_error("cudnn network: get_output() called before forward()");
  const NodeData& nd = nodes_[size_t(g_.outputs[i].node)];
  RB_CUDA(cudaMemcpyAsync(y, nd.y.data(), nd.y.bytes(), cudaMemcpyDeviceToHost, strm()));
  stream_.sync();
}

void CudnnNetwork::set_output_grad(size_t i, const float* dy) {
  check_output_index(g_, i, "set_output_grad()", "cudnn network");
  RB_CUDA(cudaMemcpyAsync(out_dy_[i].data(), dy, out_dy_[i].bytes(), cudaMemcpyHostToDevice, strm()));
  stream_.sync();
  out_dy_set_[i] = true;
}

void CudnnNetwork::get_input_grad(float* dx) {
  if (!backwarded_) throw std::logic_error("cudnn network: get_input_grad() called before backward()");
  if (!input_grad_ready_) {  // what feeds only the input gradient, which backward() skipped
    for (int id = int(g_.nodes.size()) - 1; id >= 1; --id) backward_node(id, Pass::input_grad);
    input_grad_ready_ = true;
  }
  RB_CUDA(cudaMemcpyAsync(dx, nodes_[0].dy.data(), nodes_[0].dy.bytes(), cudaMemcpyDeviceToHost, strm()));
  stream_.sync();
}

// ---------------------------------------------------------------------------------------------
// Forward

void CudnnNetwork::forward(const ForwardArgs& args) {
  if (!bound_) throw std::logic_error("cudnn network: forward() called before bind()");
  forwarded_ = backwarded_ = false;
  args_ = args;
  for (int id = 1; id < int(g_.nodes.size()); ++id) {
    if (gate_) {
      stream_.sync();
      gate_->checkpoint();
    }
    if (trace_) stream_.sync();
    const auto begin = trace_ ? Clock::now() : Clock::time_point{};
    forward_node(id);
    if (trace_) {
      stream_.sync();
      trace_(id, Phase::forward, begin, Clock::now());
    }
  }
  forwarded_ = true;
}

void CudnnNetwork::forward_node(int id) {
  const Node& n = g_.nodes[id];
  NodeData& nd = nodes_[id];
  const int p = n.inputs.at(0);
  const NodeData& in = nodes_[p];
  const Dims& in_dims = g_.nodes[p].out;
  cudnnHandle_t dnn = cudnn_.get();
  float* y = nd.y.data();
  const float* x = in.y.data();
  switch (n.kind) {
    case OpKind::input:
      break;
    case OpKind::conv:
      nd.conv->forward(dnn, strm(), scratch(), x, param(id, 0), y);
      if (n.conv.bias) gpu::bias_add(y, param(id, 1), batch_, n.out.c, int64_t(n.out.h) * n.out.w, strm());
      break;
    case OpKind::batch_norm: {
      const float* gamma = param(id, 0);
      const float* beta = param(id, 1);
      float* mean = running(id);
      float* var = mean + n.out.c;
      if (!args_.training) {
        RB_CUDA(cudnnBatchNormalizationForwardInference(dnn, CUDNN_BATCHNORM_SPATIAL, &gpu::kOne, &gpu::kZero, in.desc,
                                                        x, nd.desc, y, nd.bn_desc, gamma, beta, mean, var, bn_eps(id)));
        break;
      }
      // cuDNN updates the running statistics as PyTorch does (running = (1 - factor) * running +
      // factor * batch, the variance unbiased), except with one value per channel, where the
      // unbiased variance is undefined: then a kernel of ours does it with the biased one.
      const bool single = int64_t(batch_) * n.out.h * n.out.w == 1;
      RB_CUDA(cudnnBatchNormalizationForwardTraining(
          dnn, CUDNN_BATCHNORM_SPATIAL, &gpu::kOne, &gpu::kZero, in.desc, x, nd.desc, y, nd.bn_desc, gamma, beta,
          single ? 0.0 : double(n.bn.momentum), single ? nullptr : mean, single ? nullptr : var, bn_eps(id),
          nd.bn_mean.data(), nd.bn_invstd.data()));
      if (single) gpu::bn_running_single(nd.bn_mean.data(), mean, var, n.out.c, n.bn.momentum, strm());
      break;
    }
    case OpKind::relu:
      RB_CUDA(cudnnActivationForward(dnn, relu_, &gpu::kOne, in.desc, x, &gpu::kZero, nd.desc, y));
      break;
    case OpKind::relu6:
      gpu::relu6_forward(x, y, count(id), strm());
      break;
    case OpKind::max_pool:
      gpu::max_pool_forward(nd.pool, int64_t(batch_) * n.out.c, x, y, nd.argmax.data(), strm());
      break;
    case OpKind::avg_pool:
      if (nd.cudnn_pool)
        RB_CUDA(cudnnPoolingForward(dnn, *nd.cudnn_pool, &gpu::kOne, in.desc, x, &gpu::kZero, nd.desc, y));
      else
        gpu::avg_pool_forward(nd.pool, n.pool.exclude_padding, int64_t(batch_) * n.out.c, x, y, strm());
      break;
    case OpKind::concat: {
      int64_t offset = 0;
      for (int src : n.inputs) {
        const int64_t part = g_.nodes[src].out.numel();
        gpu::copy_rows(y + offset, n.out.numel(), nodes_[src].y.data(), part, part, batch_, false, strm());
        offset += part;
      }
      break;
    }
    case OpKind::fc: {
      // cuBLAS is column-major, and a row-major [r, c] matrix is the column-major [c, r] one:
      // y [batch, out] = x [batch, in] w^T  is  y^T [out, batch] = (w^T [in, out])^T x^T [in, batch].
      const int features = int(in_dims.numel()), out = n.out.c;
      RB_CUDA(cublasSgemm(cublas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, out, batch_, features, &gpu::kOne, param(id, 0),
                          features, x, features, &gpu::kZero, y, out));
      if (n.fc.bias) gpu::bias_add(y, param(id, 1), batch_, out, 1, strm());
      break;
    }
    case OpKind::dropout:
      if (args_.training) {
        const gpu::DropoutMask m{args_.seed, args_.step, id, args_.sample_offset, n.out.numel(), n.dropout.rate};
        gpu::dropout_forward(m, batch_, x, y, strm());
      } else {
        RB_CUDA(cudaMemcpyAsync(y, x, nd.y.bytes(), cudaMemcpyDeviceToDevice, strm()));
      }
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// Backward

void CudnnNetwork::backward(const std::function<void(int node)>& on_param_grads) {
  if (!bound_) throw std::logic_error("cudnn network: backward() called before bind()");
  if (!forwarded_) throw std::logic_error("cudnn network: backward() called before forward()");
  backwarded_ = false;
  seed_output_grads();
  for (int id = int(g_.nodes.size()) - 1; id >= 1; --id) {
    if (gate_) {
      stream_.sync();
      gate_->checkpoint();
    }
    if (trace_) stream_.sync();
    const auto begin = trace_ ? Clock::now() : Clock::time_point{};
    backward_node(id, Pass::backward);
    if (on_param_grads && !g_.nodes[id].params.empty()) on_param_grads(id);
    if (trace_) {
      stream_.sync();
      trace_(id, Phase::backward, begin, Clock::now());
    }
  }
  backwarded_ = true;
  input_grad_ready_ = !has_deferred_;
}

// The outputs' gradients into their nodes' dy: the first output of a node writes it (zero when
// not set), a second output of the same node adds.
void CudnnNetwork::seed_output_grads() {
  for (size_t k = 0; k < g_.outputs.size(); ++k) {
    const int p = g_.outputs[k].node;
    bool first = true;
    for (size_t j = 0; j < k; ++j) first = first && g_.outputs[j].node != p;
    DeviceArray<float>& dy = nodes_[p].dy;
    if (first && !out_dy_set_[k])
      RB_CUDA(cudaMemsetAsync(dy.data(), 0, dy.bytes(), strm()));
    else if (first)
      RB_CUDA(cudaMemcpyAsync(dy.data(), out_dy_[k].data(), dy.bytes(), cudaMemcpyDeviceToDevice, strm()));
    else if (out_dy_set_[k])
      gpu::copy_rows(dy.data(), 0, out_dy_[k].data(), 0, int64_t(dy.size()), 1, true, strm());
    out_dy_set_[k] = false;  // outputs not set before the next backward get zero
  }
}

// Adds this node's input gradients into its inputs' dy (or writes them, for the first
// consumer) and overwrites its parameter gradients; in Pass::input_grad only what flows into
// the network input.
void CudnnNetwork::backward_node(int id, Pass pass) {
  const Node& n = g_.nodes[id];
  const NodeData& nd = nodes_[id];
  const int p = n.inputs.at(0);
  const NodeData& in = nodes_[p];
  const Dims& in_dims = g_.nodes[p].out;
  cudnnHandle_t dnn = cudnn_.get();
  const float* dy = nd.dy.data();
  const float* x = in.y.data();
  float* dx = in.dy.data();
  const bool data = computes_grad_of(p, pass);
  const bool params = pass == Pass::backward;
  const bool acc = accumulates(p, id, 0);
  switch (n.kind) {
    case OpKind::input:
      break;
    case OpKind::conv:
      // Data first: it reads the weights, which the optimizer may update once the gradients are out.
      if (data) nd.conv->backward_data(dnn, strm(), scratch(), param(id, 0), dy, dx, acc);
      if (params) {
        nd.conv->backward_filter(dnn, strm(), scratch(), x, dy, grad(id, 0));
        if (n.conv.bias) gpu::bias_grad(dy, grad(id, 1), batch_, n.out.c, int64_t(n.out.h) * n.out.w, strm());
      }
      break;
    case OpKind::batch_norm:
      // Input and parameter gradients come from one call: never deferred (see the constructor).
      if (pass != Pass::backward) break;
      if (args_.training) {
        RB_CUDA(cudnnBatchNormalizationBackward(dnn, CUDNN_BATCHNORM_SPATIAL, &gpu::kOne, gpu::blend(acc), &gpu::kOne,
                                                &gpu::kZero, in.desc, x, nd.desc, dy, in.desc, dx, nd.bn_desc,
                                                param(id, 0), grad(id, 0), grad(id, 1), bn_eps(id),
                                                nd.bn_mean.data(), nd.bn_invstd.data()));
      } else {  // through constants: cuDNN's backward always differentiates the batch statistics
        const float* mean = running(id);
        gpu::bn_backward_global(x, dy, param(id, 0), mean, mean + n.out.c, bn_eps(id), batch_, n.out.c,
                                int64_t(n.out.h) * n.out.w, dx, grad(id, 0), grad(id, 1), acc, strm());
      }
      break;
    case OpKind::relu:
      if (data)
        RB_CUDA(cudnnActivationBackward(dnn, relu_, &gpu::kOne, nd.desc, nd.y.data(), nd.desc, dy, in.desc, x,
                                        gpu::blend(acc), in.desc, dx));
      break;
    case OpKind::relu6:
      if (data) gpu::relu6_backward(x, dy, dx, count(id), acc, strm());
      break;
    case OpKind::max_pool:
      if (data) gpu::max_pool_backward(nd.pool, int64_t(batch_) * n.out.c, dy, nd.argmax.data(), dx, acc, strm());
      break;
    case OpKind::avg_pool:
      if (!data) break;
      if (nd.cudnn_pool)
        RB_CUDA(cudnnPoolingBackward(dnn, *nd.cudnn_pool, &gpu::kOne, nd.desc, nd.y.data(), nd.desc, dy, in.desc, x,
                                     gpu::blend(acc), in.desc, dx));
      else
        gpu::avg_pool_backward(nd.pool, n.pool.exclude_padding, int64_t(batch_) * n.out.c, dy, dx, acc, strm());
      break;
    case OpKind::concat: {
      int64_t offset = 0;
      for (int k = 0; k < int(n.inputs.size()); ++k) {
        const int src = n.inputs[k];
        const int64_t part = g_.nodes[src].out.numel();
        if (computes_grad_of(src, pass))
          gpu::copy_rows(nodes_[src].dy.data(), part, dy + offset, n.out.numel(), part, batch_,
                         accumulates(src, id, k), strm());
        offset += part;
      }
      break;
    }
    case OpKind::fc: {
      const int features = int(in_dims.numel()), out = n.out.c;
      // dx [batch, in] = dy w  is  dx^T [in, batch] = w^T [in, out] dy^T [out, batch].
      if (data)
        RB_CUDA(cublasSgemm(cublas_.get(), CUBLAS_OP_N, CUBLAS_OP_N, features, batch_, out, &gpu::kOne, param(id, 0),
                            features, dy, out, gpu::blend(acc), dx, features));
      if (params) {
        // dw [out, in] = dy^T x  is  dw^T [in, out] = x^T [in, batch] (dy^T [out, batch])^T.
        RB_CUDA(cublasSgemm(cublas_.get(), CUBLAS_OP_N, CUBLAS_OP_T, features, out, batch_, &gpu::kOne, x, features,
                            dy, out, &gpu::kZero, grad(id, 0), features));
        if (n.fc.bias) gpu::bias_grad(dy, grad(id, 1), batch_, out, 1, strm());
      }
      break;
    }
    case OpKind::dropout:
      if (!data) break;
      if (args_.training) {
        const gpu::DropoutMask m{args_.seed, args_.step, id, args_.sample_offset, n.out.numel(), n.dropout.rate};
        gpu::dropout_backward(m, batch_, dy, dx, acc, strm());
      } else {  // identity
        gpu::copy_rows(dx, 0, dy, 0, count(id), 1, acc, strm());
      }
      break;
  }
}

}  // namespace

std::unique_ptr<Network> make_cudnn_network(const Graph& g, int batch, const CudnnOptions& options) {
  return std::make_unique<CudnnNetwork>(g, batch, options);
}

}  // namespace ringbench::models
