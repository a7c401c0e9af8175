// Parameters and batch-norm state alone, in a network's memory space (host memory, or device
// memory for GPU backends), filled with init_params(seed) as training starts them: what an
// inference network binds. No gradients and no momentum, so at most half of training's buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "models/network.h"

namespace ringbench::models {

class ModelBuffers {
 public:
  virtual ~ModelBuffers() = default;
  virtual float* params() = 0;  // in the network's memory space: what Network::bind() takes
  virtual float* state() = 0;
};

std::unique_ptr<ModelBuffers> make_model_buffers(const Network& net, uint64_t seed);
// Filled with given values (a checkpoint's) instead: `params` and `state` must hold the graph's
// param_count and state_count floats (Error otherwise).
std::unique_ptr<ModelBuffers> make_model_buffers(const Network& net, const std::vector<float>& params,
                                                 const std::vector<float>& state);

}  // namespace ringbench::models
