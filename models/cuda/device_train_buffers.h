// The trainer's buffers on a GPU backend (see models/train_buffers.h). Only with
// RINGBENCH_HAVE_CUDA; no CUDA types here, so CPU code can include it behind that switch.
#pragma once

#include <memory>
#include <vector>

#include "models/model_buffers.h"
#include "models/train_buffers.h"

namespace ringbench::models {

std::unique_ptr<TrainBuffers> make_device_train_buffers(const Network& net, const BucketPlan& plan,
                                                        const SgdOptions& sgd, uint64_t seed);

// Parameters and state only, on the device (model_buffers.h), filled on the network's stream.
std::unique_ptr<ModelBuffers> make_device_model_buffers(const Network& net, uint64_t seed);
// The same, holding `params` and `state` (sizes checked by make_model_buffers).
std::unique_ptr<ModelBuffers> make_device_model_buffers(const Network& net, const std::vector<float>& params,
                                                        const std::vector<float>& state);

}  // namespace ringbench::models
