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
// we need no extra header-only dependency or per-graph engine/plan caching. The one fusion we
// do, a batch norm with the ReLU or ReLU6 that alone reads it, is a kernel pair of our own
// (bn_act_kernels.h; CudnnOptions::fuse_bn_activation), which also keeps the reference's
// running-variance rule. cuDNN 9 still ships the legacy API (deprecated: it only warns with
// CUDNN_WARN_DEPRECATED).
//
// Math: by default convolutions use CUDNN_FMA_MATH and cuBLAS CUBLAS_DEFAULT_MATH, i.e. true
// fp32. (cuDNN's CUDNN_DEFAULT_MATH lets fp32 convolutions run in TF32 on Ampere and later,
// with a 10-bit mantissa: errors of ~1e-3, which the fp32 comparison against the reference
// could not tell from bugs.) RINGBENCH_CUDNN_TF32=1 (make_network) or CudnnOptions::allow_tf32
// allows TF32 in both, for speed; describe() says which.
//
// Precision bf16 or fp16 (CudnnOptions::precision), a first version in the style of PyTorch's
// autocast: activations, gradients and weights stay fp32 in every buffer; each convolution
// (conv.h) and fully connected layer (cublasGemmEx) casts its inputs into 2-byte copies in one
// shared scratch, computes on tensor cores with fp32 accumulation and casts its result back.
// Everything else (batch norm, activations, pooling, concat, dropout) computes in fp32, as AMP
// keeps batch norm and the loss in fp32; layer_precisions() lists those layers. The casts cost
// memory traffic around every conv and fc, and the memory-bound passes stay fp32: NHWC 2-byte
// activations end to end are the next step.
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
// asymmetric pads; a second one, also sized once, holds a bf16/fp16 layer's 2-byte copies.
// Nothing is allocated in forward or backward. (Not counted: the memory the
// CUDA context and the cuDNN/cuBLAS handles allocate for themselves.) An inference-only network
// (CudnnOptions::inference_only) allocates no gradients, saved batch statistics or max-pool
// indices, and sizes the workspace for the forward algorithms alone.
//
// Files: the class in cudnn_network_impl.h; here its setup and host interface; its passes in
// cudnn_passes.cc.
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
#include "models/cuda/cudnn_network_impl.h"
#include "models/cuda/cudnn_util.h"
#include "base/device_memory.h"
#include "base/errors.h"

namespace ringbench::models::cudnn {
namespace {

constexpr size_t kMaxConvWorkspace = size_t(256) << 20;  // bytes any one convolution algorithm may use

bool symmetric(const Pads& p) { return p.top == p.bottom && p.left == p.right; }

int checked_int(int64_t v, const std::string& what) {
  if (v > INT_MAX)
    throw std::invalid_argument("cudnn network: " + what + " (" + std::to_string(v) + ") exceeds INT_MAX");
  return int(v);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Setup

CudnnNetwork::CudnnNetwork(const Graph& g, int batch, const CudnnOptions& options)
    : g_(g), batch_(batch), options_(options) {
  check_network_args(g_, batch, "cudnn network");
  if (options_.precision == Precision::bf16) half_ = DType::bf16;
  if (options_.precision == Precision::fp16) half_ = DType::f16;
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

  plan_fusions();
  // Activations and gradients first, so the workspace limit sees what is left.
  nodes_.resize(size_t(n));
  for (int id = 0; id < n; ++id) {
    const Dims& d = g_.nodes[id].out;
    NodeData& nd = nodes_[id];
    nd.y = DeviceArray<float>(size_t(count(id)), "cudnn activations");
    nd.desc = gpu::nchw_desc(batch_, d.c, d.h, d.w);
    RB_CUDA(cudaMemsetAsync(nd.y.data(), 0, nd.y.bytes(), strm()));
    if (options_.inference_only) continue;
    nd.dy = DeviceArray<float>(size_t(count(id)), "cudnn activation gradients");
    // Zero: a gradient no consumer writes (a dead end) must read as zero.
    RB_CUDA(cudaMemsetAsync(nd.dy.data(), 0, nd.dy.bytes(), strm()));
  }
  if (!options_.inference_only)
    for (const Output& o : g_.outputs) out_dy_.emplace_back(size_t(count(o.node)), "cudnn output gradients");
  out_dy_set_.assign(g_.outputs.size(), false);

  const gpu::ConvSettings conv_settings{options_.allow_tf32, workspace_limit(), options_.measure_algos,
                                        options_.inference_only, half_};
  size_t conv_bytes = 0, pad_floats = 0, half_bytes = 0;
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
      half_bytes = std::max(half_bytes, conv->half_bytes());
    }
    if (g_.nodes[id].kind == OpKind::fc) half_bytes = std::max(half_bytes, fc_half_layout(id).bytes);
  }
  if (half_bytes) {
    half_bytes_ = half_bytes;
    half_scratch_ = DeviceArray<char>(half_bytes, "cudnn bf16/fp16 scratch");
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

// A batch norm is fused with a ReLU or ReLU6 that is its only reader, unless the batch norm is
// an output (its own value must then exist) or too large for the fused kernels.
void CudnnNetwork::plan_fusions() {
  const int n = int(g_.nodes.size());
  fused_act_.assign(size_t(n), -1);
  fused_bn_.assign(size_t(n), -1);
  if (!options_.fuse_bn_activation) return;
  std::vector<int> readers(size_t(n), 0), reader(size_t(n), -1);
  for (int id = 1; id < n; ++id)
    for (int p : g_.nodes[id].inputs) {
      ++readers[size_t(p)];
      reader[size_t(p)] = id;
    }
  for (const Output& o : g_.outputs) ++readers[size_t(o.node)];
  for (int id = 1; id < n; ++id) {
    if (g_.nodes[id].kind != OpKind::batch_norm || readers[size_t(id)] != 1 || reader[size_t(id)] < 0) continue;
    if (!gpu::bn_act_fits(bn_shape(id))) continue;  // 2^31 values or more: cuDNN's 64-bit indices
    const int a = reader[size_t(id)];
    if (g_.nodes[a].kind != OpKind::relu && g_.nodes[a].kind != OpKind::relu6) continue;
    fused_act_[size_t(id)] = a;
    fused_bn_[size_t(a)] = id;
  }
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
      // A training forward's batch statistics, for backward; the fused kernels' statistics always.
      if (!options_.inference_only || fused(id)) {
        nd.bn_mean = DeviceArray<float>(size_t(n.out.c), "cudnn batch-norm statistics");
        nd.bn_invstd = DeviceArray<float>(size_t(n.out.c), "cudnn batch-norm statistics");
      }
      if (fused(id)) {
        const size_t scratch = gpu::bn_act_scratch_doubles(bn_shape(id));
        if (scratch > bn_scratch_.size()) bn_scratch_ = DeviceArray<double>(scratch, "cudnn batch-norm scratch");
        note(std::string("bn+") + op_name(g_.nodes[size_t(fused_act_[id])].kind) + " fused kernel");
      } else {
        note("bn cudnnBatchNormalization* spatial");
      }
      break;
    case OpKind::relu:
      if (!fused(id)) note("relu cudnnActivation");
      break;
    case OpKind::relu6:
      if (!fused(id)) note("relu6 kernel");
      break;
    case OpKind::max_pool:
    case OpKind::avg_pool: {
      const PoolSpec& p = n.pool;
      nd.pool = {in.h, in.w, n.out.h, n.out.w, p.kh, p.kw, p.stride_h, p.stride_w, p.pad.top, p.pad.left};
      if (n.kind == OpKind::max_pool) {
        // Our kernel, not cuDNN's: the reference gives a tied window's gradient to its first
        // tap (ties are common after a ReLU: windows of zeros), cuDNN to any one of them.
        if (!options_.inference_only) nd.argmax = DeviceArray<int32_t>(size_t(count(id)), "cudnn max-pool indices");
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
      note((half_ == DType::f32 ? std::string("fc cublasSgemm")
                                : std::string("fc cublasGemmEx ") + precision_name(options_.precision)) +
           (n.fc.bias ? " +bias kernel" : ""));
      break;
    case OpKind::dropout:
      note("dropout kernel");
      break;
  }
}

std::string CudnnNetwork::math_description() const {
  if (half_ != DType::f32)
    return std::string("convolutions and fc layers in ") + precision_name(options_.precision) +
           " tensor op (cast from and back to fp32 around each; fp32 accumulation), the other layers in fp32";
  return options_.allow_tf32 ? "TF32 allowed (CUDNN_DEFAULT_MATH, CUBLAS_TF32_TENSOR_OP_MATH)"
                             : "fp32 (CUDNN_FMA_MATH, CUBLAS_DEFAULT_MATH)";
}

std::vector<LayerPrecision> CudnnNetwork::layer_precisions() const {
  if (half_ == DType::f32) return {};
  const std::string why = std::string("fp32 in this version: only convolutions and fully connected layers compute in ") +
                          precision_name(options_.precision);
  std::vector<LayerPrecision> kept;
  for (int id = 1; id < int(g_.nodes.size()); ++id) {
    const OpKind k = g_.nodes[id].kind;
    if (k != OpKind::conv && k != OpKind::fc) kept.push_back({id, Precision::fp32, why});
  }
  return kept;
}

std::string CudnnNetwork::describe() const {
  const size_t v = cudnnGetVersion();
  std::string s = "cudnn (cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." +
                  std::to_string(v % 100) + ", " + math_description() +
                  (options_.measure_algos ? ", conv algorithms measured (cudnnFind)" : ", conv algorithms by heuristics") +
                  ", workspace " + std::to_string((pad_bytes_ + library_bytes_ + (1 << 19)) >> 20) + " MiB)";
  return describe_impls(std::move(s), impls_);
}

// ---------------------------------------------------------------------------------------------
// Host interface

void CudnnNetwork::bind(float* params, float* grads, float* state) {
  check_bind_args(g_, params, grads, state, "cudnn network", options_.inference_only);
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
  check_training_call(options_.inference_only, "set_output_grad()", "cudnn network");
  check_output_index(g_, i, "set_output_grad()", "cudnn network");
  RB_CUDA(cudaMemcpyAsync(out_dy_[i].data(), dy, out_dy_[i].bytes(), cudaMemcpyHostToDevice, strm()));
  stream_.sync();
  out_dy_set_[i] = true;
}

void CudnnNetwork::get_input_grad(float* dx) {
  check_training_call(options_.inference_only, "get_input_grad()", "cudnn network");
  if (!backwarded_) throw std::logic_error("cudnn network: get_input_grad() called before backward()");
  if (!input_grad_ready_) {  // what feeds only the input gradient, which backward() skipped
    for (int id = int(g_.nodes.size()) - 1; id >= 1; --id) backward_node(id, Pass::input_grad);
    input_grad_ready_ = true;
  }
  RB_CUDA(cudaMemcpyAsync(dx, nodes_[0].dy.data(), nodes_[0].dy.bytes(), cudaMemcpyDeviceToHost, strm()));
  stream_.sync();
}

}  // namespace ringbench::models::cudnn

namespace ringbench::models {

std::unique_ptr<Network> make_cudnn_network(const Graph& g, int batch, const CudnnOptions& options) {
  return std::make_unique<cudnn::CudnnNetwork>(g, batch, options);
}

}  // namespace ringbench::models
