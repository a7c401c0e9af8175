#include "models/gpu_dispatch.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "base/errors.h"
#include "ringbench/config.h"

#if RINGBENCH_HAVE_CUDA
#include "cuda/device.h"
#include "models/backends.h"
#include "models/cuda/device_train_buffers.h"
#include "models/cuda/gpu_reducers.h"
#endif

namespace ringbench::models {
namespace {

[[maybe_unused]] std::string no_cuda(const Network& net) {
  return "the " + net.backend() + " backend computes on a GPU, but this ringbench was built without CUDA "
         "(RINGBENCH_WITH_CUDA=OFF)";
}

#if RINGBENCH_HAVE_CUDA
// Why the current GPU cannot compute in `p` ("" when it can): tf32 and bf16 tensor cores from
// compute capability 8.0 (Ampere; else cuDNN would quietly compute tf32 in fp32, and has no bf16
// kernels), fp16 ones from 7.0 (Volta).
std::string gpu_cannot_compute_in(Precision p) {
  const int need = p == Precision::tf32 || p == Precision::bf16 ? 8 : p == Precision::fp16 ? 7 : 0;
  if (need == 0) return "";
  const cuda::GpuInfo gpu = cuda::gpu_info(0, false);
  if (gpu.cc_major >= need) return "";
  return std::string("--precision ") + precision_name(p) + " needs a GPU of compute capability " +
         std::to_string(need) + ".0 or later (" + (need == 8 ? "Ampere" : "Volta") + "); " + gpu.name + " is " +
         std::to_string(gpu.cc_major) + "." + std::to_string(gpu.cc_minor);
}
#endif

}  // namespace

#if RINGBENCH_HAVE_CUDA

bool cudnn_usable() { return cuda::unavailable_reason().empty(); }

std::unique_ptr<Network> make_gpu_network(const Graph& g, int batch, const NetworkOptions& options) {
  if (const std::string why = cuda::unavailable_reason(); !why.empty())
    throw std::invalid_argument("backend 'cudnn' cannot run here: " + why);
  if (const std::string why = gpu_cannot_compute_in(options.precision); !why.empty())
    throw std::invalid_argument(why);
  // TF32 (faster, ~1e-3 relative error) only when asked for; see models/cuda/cudnn_network.cc.
  const char* tf32 = std::getenv("RINGBENCH_CUDNN_TF32");
  // The fused batch norm + activation kernels are opt-in ("1") until they have run on a GPU:
  // they pass the CPU emulation tests only (docs/precision.md, "GPU").
  const char* fuse = std::getenv("RINGBENCH_CUDNN_FUSE_BN");
  return make_cudnn_network(g, batch, {.allow_tf32 = options.precision == Precision::tf32 ||
                                                     (tf32 && std::string(tf32) == "1"),
                                       .precision = options.precision,
                                       .measure_algos = options.measure_conv_algos,
                                       .inference_only = options.inference_only,
                                       .fuse_bn_activation = fuse && std::string(fuse) == "1"});
}

std::unique_ptr<ModelBuffers> make_gpu_model_buffers(const Network& net, uint64_t seed) {
  return make_device_model_buffers(net, seed);
}

std::unique_ptr<ModelBuffers> make_gpu_model_buffers(const Network& net, const std::vector<float>& params,
                                                     const std::vector<float>& state) {
  return make_device_model_buffers(net, params, state);
}

std::unique_ptr<TrainBuffers> make_gpu_train_buffers(const Network& net, const BucketPlan& plan,
                                                     const SgdOptions& sgd, uint64_t seed) {
  return make_device_train_buffers(net, plan, sgd, seed);
}

std::unique_ptr<GradientReducer> make_gpu_staged_reducer(float* device_grads, size_t count,
                                                         const ReducerFactory& host, size_t piece_bytes) {
  return make_staged_reducer(device_grads, count, host, piece_bytes);
}

#else

bool cudnn_usable() { return false; }

std::unique_ptr<Network> make_gpu_network(const Graph&, int, const NetworkOptions&) {
  throw std::invalid_argument("this ringbench was built without CUDA: configure with -DRINGBENCH_WITH_CUDA=ON "
                              "(needs the CUDA toolkit and cuDNN 9) to use --backend cudnn");
}

std::unique_ptr<ModelBuffers> make_gpu_model_buffers(const Network& net, uint64_t) {
  throw std::invalid_argument(no_cuda(net));
}

std::unique_ptr<ModelBuffers> make_gpu_model_buffers(const Network& net, const std::vector<float>&,
                                                     const std::vector<float>&) {
  throw std::invalid_argument(no_cuda(net));
}

std::unique_ptr<TrainBuffers> make_gpu_train_buffers(const Network& net, const BucketPlan&, const SgdOptions&,
                                                     uint64_t) {
  throw std::invalid_argument(no_cuda(net));
}

std::unique_ptr<GradientReducer> make_gpu_staged_reducer(float*, size_t, const ReducerFactory&, size_t) {
  throw Error("--device cuda in a build without CUDA");
}

#endif

}  // namespace ringbench::models
