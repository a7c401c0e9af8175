// The models library's one door to its CUDA backend (models/cuda/): each function calls into it
// in a build with CUDA, and throws std::invalid_argument saying the build has no CUDA in one
// without. gpu_dispatch.cc is the only file of the library outside models/cuda/ that reads
// RINGBENCH_HAVE_CUDA, so the other files compile the same in every build (see models/CMakeLists.txt).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "models/model_buffers.h"
#include "models/network.h"
#include "models/train_buffers.h"
#include "models/trainer.h"

namespace ringbench::models {

// Built with CUDA and a GPU usable here: `--backend auto` may list "cudnn".
bool cudnn_usable();
// The "cudnn" network (make_network's), or why it cannot be made here.
std::unique_ptr<Network> make_gpu_network(const Graph& g, int batch, const NetworkOptions& options);
// Parameters and state on the device (model_buffers.h).
std::unique_ptr<ModelBuffers> make_gpu_model_buffers(const Network& net, uint64_t seed);
std::unique_ptr<ModelBuffers> make_gpu_model_buffers(const Network& net, const std::vector<float>& params,
                                                     const std::vector<float>& state);
// The trainer's buffers on the device (train_buffers.h).
std::unique_ptr<TrainBuffers> make_gpu_train_buffers(const Network& net, const BucketPlan& plan,
                                                     const SgdOptions& sgd, uint64_t seed);
// A host reducer on device gradients, staged through pinned memory (models/cuda/gpu_reducers.h).
std::unique_ptr<GradientReducer> make_gpu_staged_reducer(float* device_grads, size_t count,
                                                         const ReducerFactory& host, size_t piece_bytes);

}  // namespace ringbench::models
