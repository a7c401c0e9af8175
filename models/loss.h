// Softmax cross-entropy on host logits, the loss every backend's outputs feed.
#pragma once

#include <cstdint>

namespace ringbench::models {

struct LossResult {
  double loss = 0;  // mean over the batch, times the output's weight
  int correct = 0;  // samples whose largest logit is the label
};

// logits and dlogits are batch x classes. dlogits = weight * (softmax - onehot) / batch, the
// gradient of the batch-mean loss. Throws std::out_of_range for a label outside [0, classes).
LossResult softmax_xent(const float* logits, const int32_t* labels, int batch, int classes,
                        float weight, float* dlogits);

}  // namespace ringbench::models
