// The CUDA backend's forward and backward passes (cudnn_network.cc has the overview): what each
// layer queues on the network's stream, and the synchronization a gate or trace asks for.
#include <cublas_v2.h>
#include <cudnn.h>

#include <cstdint>
#include <functional>
#include <stdexcept>

#include "cuda/check.h"
#include "models/cuda/cudnn_network_impl.h"
#include "models/cuda/layer_kernels.h"

namespace ringbench::models::cudnn {

// ---------------------------------------------------------------------------------------------
// Forward

void CudnnNetwork::forward(const ForwardArgs& args) {
  if (!bound_) throw std::logic_error("cudnn network: forward() called before bind()");
  check_forward_mode(options_.inference_only, args, "cudnn network");
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
    case OpKind::batch_norm:
      if (fused(id)) forward_fused_bn(id);
      else forward_batch_norm(id);
      break;
    case OpKind::relu:
      if (fused(id)) break;  // its batch norm wrote y
      RB_CUDA(cudnnActivationForward(dnn, relu_, &gpu::kOne, in.desc, x, &gpu::kZero, nd.desc, y));
      break;
    case OpKind::relu6:
      if (fused(id)) break;
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
    case OpKind::fc:
      forward_fc(id);
      break;
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

void CudnnNetwork::forward_batch_norm(int id) {
  const Node& n = g_.nodes[id];
  NodeData& nd = nodes_[id];
  const NodeData& in = nodes_[n.inputs.at(0)];
  cudnnHandle_t dnn = cudnn_.get();
  float* y = nd.y.data();
  const float* x = in.y.data();
  const float* gamma = param(id, 0);
  const float* beta = param(id, 1);
  float* mean = running(id);
  float* var = mean + n.out.c;
  if (!args_.training) {
    RB_CUDA(cudnnBatchNormalizationForwardInference(dnn, CUDNN_BATCHNORM_SPATIAL, &gpu::kOne, &gpu::kZero, in.desc,
                                                    x, nd.desc, y, nd.bn_desc, gamma, beta, mean, var, bn_eps(id)));
    return;
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
}

namespace {
gpu::BnActivation fused_kind(OpKind k) {
  return k == OpKind::relu6 ? gpu::BnActivation::relu6 : gpu::BnActivation::relu;
}
}  // namespace

// Into the fused activation's output: y = act(batch norm(x)).
void CudnnNetwork::forward_fused_bn(int id) {
  const int a = fused_act_[id];
  const float* x = nodes_[g_.nodes[id].inputs.at(0)].y.data();
  float* y = nodes_[a].y.data();
  const gpu::BnActivation act = fused_kind(g_.nodes[a].kind);
  if (args_.training)
    gpu::bn_act_forward_training(bn_shape(id), act, x, bn_tensors(id), bn_eps(id), g_.nodes[id].bn.momentum,
                                 bn_scratch_.data(), y, strm());
  else
    gpu::bn_act_forward_inference(bn_shape(id), act, x, bn_tensors(id), bn_eps(id), y, strm());
}

// ---------------------------------------------------------------------------------------------
// Fully connected layers: one GEMM per direction, in fp32 or (bf16/fp16) on 2-byte copies of
// the operands with an fp32 result, so beta = 1 accumulates into an fp32 gradient directly.

CudnnNetwork::FcHalfLayout CudnnNetwork::fc_half_layout(int id) const {
  if (half_ == DType::f32) return {};
  const size_t features = size_t(g_.nodes[g_.nodes[id].inputs.at(0)].out.numel()), out = size_t(g_.nodes[id].out.c);
  FcHalfLayout l;
  l.w = gpu::align256(size_t(batch_) * features * 2);
  l.dy = l.w + gpu::align256(out * features * 2);
  l.bytes = l.dy + gpu::align256(size_t(batch_) * out * 2);
  return l;
}

const void* CudnnNetwork::gemm_operand(const float* src, size_t count, size_t offset) {
  if (half_ == DType::f32) return src;
  void* h = half_scratch_.data() + offset;
  gpu::narrow(half_, src, h, int64_t(count), strm());
  return h;
}

void CudnnNetwork::gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a, int lda,
                        const void* b, int ldb, const float* beta, float* c, int ldc) {
  if (half_ == DType::f32) {
    RB_CUDA(cublasSgemm(cublas_.get(), ta, tb, m, n, k, &gpu::kOne, static_cast<const float*>(a), lda,
                        static_cast<const float*>(b), ldb, beta, c, ldc));
    return;
  }
  const cudaDataType_t t = half_ == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  RB_CUDA(cublasGemmEx(cublas_.get(), ta, tb, m, n, k, &gpu::kOne, a, t, lda, b, t, ldb, beta, c, CUDA_R_32F, ldc,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void CudnnNetwork::forward_fc(int id) {
  const Node& n = g_.nodes[id];
  const int p = n.inputs.at(0);
  float* y = nodes_[id].y.data();
  const int features = int(g_.nodes[p].out.numel()), out = n.out.c;
  const FcHalfLayout h = fc_half_layout(id);
  const void* w = gemm_operand(param(id, 0), size_t(out) * size_t(features), h.w);
  const void* x = gemm_operand(nodes_[p].y.data(), size_t(batch_) * size_t(features), h.x);
  // cuBLAS is column-major, and a row-major [r, c] matrix is the column-major [c, r] one:
  // y [batch, out] = x [batch, in] w^T  is  y^T [out, batch] = (w^T [in, out])^T x^T [in, batch].
  gemm(CUBLAS_OP_T, CUBLAS_OP_N, out, batch_, features, w, features, x, features, &gpu::kZero, y, out);
  if (n.fc.bias) gpu::bias_add(y, param(id, 1), batch_, out, 1, strm());
}

// ---------------------------------------------------------------------------------------------
// Backward

void CudnnNetwork::backward(const std::function<void(int node)>& on_param_grads) {
  check_training_call(options_.inference_only, "backward()", "cudnn network");
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
      if (pass == Pass::backward && fused(id)) backward_fused_bn(id, acc);
      else if (pass == Pass::backward) backward_batch_norm(id, acc);
      break;
    case OpKind::relu:
      if (data && !fused(id))
        RB_CUDA(cudnnActivationBackward(dnn, relu_, &gpu::kOne, nd.desc, nd.y.data(), nd.desc, dy, in.desc, x,
                                        gpu::blend(acc), in.desc, dx));
      break;
    case OpKind::relu6:
      if (data && !fused(id)) gpu::relu6_backward(x, dy, dx, count(id), acc, strm());
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
    case OpKind::concat:
      backward_concat(id, pass);
      break;
    case OpKind::fc:
      backward_fc(id, data, params, acc);
      break;
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

void CudnnNetwork::backward_batch_norm(int id, bool acc) {
  const Node& n = g_.nodes[id];
  const NodeData& nd = nodes_[id];
  const NodeData& in = nodes_[n.inputs.at(0)];
  const float* dy = nd.dy.data();
  const float* x = in.y.data();
  float* dx = in.dy.data();
  if (args_.training) {
    RB_CUDA(cudnnBatchNormalizationBackward(cudnn_.get(), CUDNN_BATCHNORM_SPATIAL, &gpu::kOne, gpu::blend(acc),
                                            &gpu::kOne, &gpu::kZero, in.desc, x, nd.desc, dy, in.desc, dx, nd.bn_desc,
                                            param(id, 0), grad(id, 0), grad(id, 1), bn_eps(id),
                                            nd.bn_mean.data(), nd.bn_invstd.data()));
  } else {  // through constants: cuDNN's backward always differentiates the batch statistics
    const float* mean = running(id);
    gpu::bn_backward_global(x, dy, param(id, 0), mean, mean + n.out.c, bn_eps(id), batch_, n.out.c,
                            int64_t(n.out.h) * n.out.w, dx, grad(id, 0), grad(id, 1), acc, strm());
  }
}

// From the fused activation's gradient (the batch norm's own dy and y are unused).
void CudnnNetwork::backward_fused_bn(int id, bool acc) {
  const int a = fused_act_[id];
  const NodeData& in = nodes_[g_.nodes[id].inputs.at(0)];
  gpu::bn_act_backward(bn_shape(id), fused_kind(g_.nodes[a].kind), args_.training, in.y.data(), nodes_[a].dy.data(),
                       bn_tensors(id), bn_scratch_.data(),
                       {in.dy.data(), grad(id, 0), grad(id, 1), acc}, strm());
}

// Each input's gradient is its per-sample range of dy.
void CudnnNetwork::backward_concat(int id, Pass pass) {
  const Node& n = g_.nodes[id];
  const float* dy = nodes_[id].dy.data();
  int64_t offset = 0;
  for (int k = 0; k < int(n.inputs.size()); ++k) {
    const int src = n.inputs[k];
    const int64_t part = g_.nodes[src].out.numel();
    if (computes_grad_of(src, pass))
      gpu::copy_rows(nodes_[src].dy.data(), part, dy + offset, n.out.numel(), part, batch_, accumulates(src, id, k),
                     strm());
    offset += part;
  }
}

// `data`: the input's gradient; `params`: the weight and bias gradients.
void CudnnNetwork::backward_fc(int id, bool data, bool params, bool acc) {
  const Node& n = g_.nodes[id];
  const int p = n.inputs.at(0);
  if (!data && !params) return;
  const float* dy = nodes_[id].dy.data();
  const int features = int(g_.nodes[p].out.numel()), out = n.out.c;
  const FcHalfLayout h = fc_half_layout(id);
  const void* dy_op = gemm_operand(dy, size_t(batch_) * size_t(out), h.dy);
  // dx [batch, in] = dy w  is  dx^T [in, batch] = w^T [in, out] dy^T [out, batch].
  if (data) {
    const void* w = gemm_operand(param(id, 0), size_t(out) * size_t(features), h.w);
    gemm(CUBLAS_OP_N, CUBLAS_OP_N, features, batch_, out, w, features, dy_op, out, gpu::blend(acc),
         nodes_[p].dy.data(), features);
  }
  if (params) {
    // dw [out, in] = dy^T x  is  dw^T [in, out] = x^T [in, batch] (dy^T [out, batch])^T.
    const void* x = gemm_operand(nodes_[p].y.data(), size_t(batch_) * size_t(features), h.x);
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, features, out, batch_, x, features, dy_op, out, &gpu::kZero, grad(id, 0),
         features);
    if (n.fc.bias) gpu::bias_grad(dy, grad(id, 1), batch_, out, 1, strm());
  }
}

}  // namespace ringbench::models::cudnn
