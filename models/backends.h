// Constructors of the individual backends, behind make_network() (network.h).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/network.h"

namespace ringbench::models {

// inference_only: see NetworkOptions.
std::unique_ptr<Network> make_reference_network(const Graph& g, int batch, bool inference_only = false);
// precision: fp32 or bf16 (std::invalid_argument without native bf16 instructions).
// plain_params: see NetworkOptions.
std::unique_ptr<Network> make_onednn_network(const Graph& g, int batch, bool inference_only = false,
                                             Precision precision = Precision::fp32,
                                             bool plain_params = false);  // RINGBENCH_HAVE_DNNL

// "cudnn" (RINGBENCH_HAVE_CUDA; models/cuda/cudnn_network.cc): cuDNN, cuBLAS and our kernels on
// the current CUDA device. fp32 unless allow_tf32 (make_network: RINGBENCH_CUDNN_TF32=1) or a
// precision of bf16 or fp16.
struct CudnnOptions {
  bool allow_tf32 = false;
  // bf16 or fp16: convolutions and fully connected layers compute on 2-byte copies of their
  // inputs (tensor cores, fp32 accumulation), everything else stays fp32 (cudnn_network.cc,
  // "Precision"). fp32 or tf32: allow_tf32 decides. The caller checks the GPU can (make_network).
  Precision precision = Precision::fp32;
  bool measure_algos = false;  // time every convolution algorithm at setup (cudnnFind*)
  bool inference_only = false;  // see NetworkOptions
  // A batch norm whose only reader is a ReLU or ReLU6 runs with it as one kernel pair
  // (bn_act_kernels.h) instead of cuDNN's batch norm and a separate activation pass
  // (make_network: off unless RINGBENCH_CUDNN_FUSE_BN=1, until it has run on a GPU).
  bool fuse_bn_activation = true;
};
std::unique_ptr<Network> make_cudnn_network(const Graph& g, int batch, const CudnnOptions& options = {});

// What every backend requires of its arguments: batch >= 1, a graph that starts with its input
// node and has an output. Throws std::invalid_argument, the message prefixed with `who`
// ("cudnn network").
void check_network_args(const Graph& g, int batch, const std::string& who);

// bind()'s arguments: parameter and gradient buffers where the graph has parameters (no
// gradients for an inference-only network), a state buffer where it has batch norm
// (std::invalid_argument, prefixed with `who`).
void check_bind_args(const Graph& g, const float* params, const float* grads, const float* state,
                     const std::string& who, bool inference_only = false);

// An inference-only network's guards (NetworkOptions::inference_only): Error for a training
// forward, and for `what` ("backward()"), a call only training has.
void check_forward_mode(bool inference_only, const ForwardArgs& args, const std::string& who);
void check_training_call(bool inference_only, const char* what, const std::string& who);

// Output index i of a call named `what` ("get_output()"): std::out_of_range if there is none.
void check_output_index(const Graph& g, size_t i, const char* what, const std::string& who);

// describe()'s list of what runs the layers, and how often: `head` + ": conv fwd x3, ...".
std::string describe_impls(std::string head, const std::vector<std::pair<std::string, int>>& impls);

// One more use of `what` in such a list: its count goes up, or it joins the end (first-use order).
void count_impl(std::vector<std::pair<std::string, int>>& impls, const std::string& what);

// Who writes each node's activation gradient first in backward order, for the backends that
// overwrite with the first write and accumulate the others: the outputs' gradients (seeded
// before backward), else the highest-numbered consumer (lowest input slot on ties).
struct GradientWriters {
  // Per node: the (consumer, input slot) that writes its gradient first; {-1, -1} for an output
  // and for a node nothing reads.
  std::vector<std::pair<int, int>> first_slot;
  // The input's gradient may be left to get_input_grad(): false where a batch norm reads the
  // input (its backward yields the input gradient together with its parameter gradients).
  bool defer_input_grad = true;
  bool input_consumed = false;  // some node reads the input
};
GradientWriters plan_gradient_writers(const Graph& g);

}  // namespace ringbench::models
