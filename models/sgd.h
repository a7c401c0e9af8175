// SGD with momentum and weight decay (PyTorch's formulation), applied per parameter tensor so
// the training loop can update each gradient bucket as soon as its allreduce is done:
//   g = grad + weight_decay * param   (weight decay on conv/fc weights only)
//   v = momentum * v + g
//   param -= lr * v
#pragma once

#include <cstddef>

#include "models/graph.h"

namespace ringbench::models {

struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.9f;
  float weight_decay = 4e-5f;
};

// Updates parameter tensors [first, last] (indices into g.params) in the flat buffers.
void sgd_update(const Graph& g, int first, int last, const SgdOptions& o, float* params,
                const float* grads, float* velocity);

}  // namespace ringbench::models
