// The CUDA backend's network class (cudnn_network.cc has the overview): cudnn_network.cc sets
// it up and serves the host interface, cudnn_passes.cc runs its forward and backward passes.
// Internal to those two files; others use make_cudnn_network() (backends.h).
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/memory.h"
#include "models/backends.h"
#include "models/cuda/bn_act_kernels.h"
#include "models/cuda/conv.h"
#include "models/cuda/cudnn_util.h"
#include "models/cuda/layer_kernels.h"
#include "models/graph.h"
#include "models/network.h"

namespace ringbench::models::cudnn {

using Clock = std::chrono::steady_clock;
using cuda::DeviceArray;

struct CudnnDestroy {
  void operator()(cudnnHandle_t h) const { cudnnDestroy(h); }
};
struct CublasDestroy {
  void operator()(cublasHandle_t h) const { cublasDestroy(h); }
};

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
  bool inference_only() const override { return options_.inference_only; }
  Precision precision() const override {
    return half_ != DType::f32 ? options_.precision : options_.allow_tf32 ? Precision::tf32 : Precision::fp32;
  }
  std::vector<LayerPrecision> layer_precisions() const override;

  void bind(float* params, float* grads, float* state) override;
  void set_input(const float* x) override;
  void forward(const ForwardArgs& args) override;
  void get_output(size_t i, float* y) override;
  void set_output_grad(size_t i, const float* dy) override;
  void backward(const std::function<void(int node)>& on_param_grads) override;
  void get_input_grad(float* dx) override;

 private:
  // Inference-only networks (CudnnOptions::inference_only) leave dy, bn_mean, bn_invstd, argmax
  // and out_dy_ empty and choose no backward convolution algorithms.
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

  void plan_fusions();
  void setup_node(int id, const gpu::ConvSettings& conv_settings);
  void note(const std::string& what) { count_impl(impls_, what); }
  size_t workspace_limit() const;
  std::string math_description() const;  // describe()'s arithmetic

  void forward_node(int id);
  void forward_batch_norm(int id);
  void forward_fused_bn(int id);
  void forward_fc(int id);
  void backward_node(int id, Pass pass);
  void backward_batch_norm(int id, bool acc);
  void backward_fused_bn(int id, bool acc);
  void backward_concat(int id, Pass pass);
  void backward_fc(int id, bool data, bool params, bool acc);
  // An fc layer's 2-byte copies in the half scratch (bf16/fp16): byte offsets and the total.
  struct FcHalfLayout {
    size_t x = 0, w = 0, dy = 0, bytes = 0;
  };
  FcHalfLayout fc_half_layout(int id) const;
  // `count` floats at `src` as a GEMM operand: themselves (fp32), or cast into the half scratch
  // at byte `offset`.
  const void* gemm_operand(const float* src, size_t count, size_t offset);
  // c (fp32, column-major) = op(a) op(b) + beta c: cublasSgemm, or cublasGemmEx on 2-byte a and b
  // with fp32 accumulation (bf16/fp16).
  void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a, int lda, const void* b,
            int ldb, const float* beta, float* c, int ldc);
  void seed_output_grads();
  bool computes_grad_of(int p, Pass pass) const {
    return pass == Pass::backward ? !(p == 0 && defer_input_grad_) : p == 0;
  }
  bool accumulates(int p, int consumer, int slot) const { return first_slot_[p] != std::pair{consumer, slot}; }

  const float* param(int id, size_t k) const { return params_ + g_.params[g_.nodes[id].params.at(k)].offset; }
  float* grad(int id, size_t k) const { return grads_ + g_.params[g_.nodes[id].params.at(k)].offset; }
  float* running(int id) const { return state_ + g_.state.at(size_t(g_.nodes[id].state)).offset; }
  int64_t count(int id) const { return int64_t(batch_) * g_.nodes[id].out.numel(); }
  bool fused(int id) const { return fused_act_[id] >= 0 || fused_bn_[id] >= 0; }
  gpu::BnShape bn_shape(int id) const {
    return {batch_, g_.nodes[id].out.c, int64_t(g_.nodes[id].out.h) * g_.nodes[id].out.w};
  }
  gpu::BnTensors bn_tensors(int id) {
    return {param(id, 0), param(id, 1), running(id), nodes_[id].bn_mean.data(), nodes_[id].bn_invstd.data()};
  }
  double bn_eps(int id) const { return std::max(double(g_.nodes[id].bn.eps), CUDNN_BN_MIN_EPSILON); }
  gpu::ConvScratch scratch() const {
    return {workspace_.data() + pad_bytes_, library_bytes_, pad_, half_bytes_ ? half_scratch_.data() : nullptr};
  }
  cudaStream_t strm() const { return stream_.get(); }

  Graph g_;
  int batch_;
  CudnnOptions options_;
  DType half_ = DType::f32;  // bf16 or f16: what convolutions and fc layers compute on; f32: fp32 or tf32
  cuda::Stream stream_;
  std::unique_ptr<cudnnContext, CudnnDestroy> cudnn_;
  std::unique_ptr<cublasContext, CublasDestroy> cublas_;
  gpu::ActivationDesc relu_;

  std::vector<NodeData> nodes_;
  // Batch norm + activation fusion (CudnnOptions::fuse_bn_activation): per node, a batch norm's
  // fused activation and an activation's batch norm (-1: none). The batch norm's forward writes
  // the activation's output and its backward reads the activation's gradient; the activation
  // node itself does nothing.
  std::vector<int> fused_act_, fused_bn_;
  DeviceArray<double> bn_scratch_;  // the fused kernels' per-block partial sums
  std::vector<std::pair<int, int>> first_slot_;  // per node: the (consumer, input slot) that writes its gradient first
  bool defer_input_grad_ = false, has_deferred_ = false;
  std::vector<DeviceArray<float>> out_dy_;  // per output: the gradient set_output_grad() staged
  std::vector<bool> out_dy_set_;

  gpu::ConvAlgoCache algo_cache_;
  DeviceArray<char> workspace_;  // [padded-input scratch | cuDNN and cuBLAS workspace]
  size_t pad_bytes_ = 0, library_bytes_ = 0;
  float* pad_ = nullptr;
  // The 2-byte copies a bf16/fp16 convolution or fc layer computes on, sized for the largest.
  DeviceArray<char> half_scratch_;
  size_t half_bytes_ = 0;
  std::vector<std::pair<std::string, int>> impls_;  // describe(): what runs each layer, and how often

  float* params_ = nullptr;
  float* grads_ = nullptr;
  float* state_ = nullptr;
  ForwardArgs args_;  // of the last forward (dropout's backward recomputes its mask)
  bool bound_ = false, forwarded_ = false, backwarded_ = false, input_grad_ready_ = false;
};

}  // namespace ringbench::models::cudnn
