// Constructors of the individual backends, behind make_network() (network.h).
#pragma once

#include <memory>

#include "models/network.h"

namespace ringbench::models {

std::unique_ptr<Network> make_reference_network(const Graph& g, int batch);
std::unique_ptr<Network> make_onednn_network(const Graph& g, int batch);  // RINGBENCH_HAVE_DNNL

// "cudnn" (RINGBENCH_HAVE_CUDA; models/cuda/cudnn_network.cc): cuDNN, cuBLAS and our kernels on
// the current CUDA device. fp32 unless allow_tf32 (make_network: RINGBENCH_CUDNN_TF32=1).
struct CudnnOptions {
  bool allow_tf32 = false;
};
std::unique_ptr<Network> make_cudnn_network(const Graph& g, int batch, const CudnnOptions& options = {});

}  // namespace ringbench::models
