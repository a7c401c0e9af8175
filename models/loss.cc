#include "models/loss.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace ringbench::models {

LossResult softmax_xent(const float* logits, const int32_t* labels, int batch, int classes,
                        float weight, float* dlogits) {
  LossResult r;
  double total = 0;
  for (int n = 0; n < batch; ++n) {
    const float* z = logits + size_t(n) * size_t(classes);
    float* dz = dlogits + size_t(n) * size_t(classes);
    const int y = labels[n];
    if (y < 0 || y >= classes)
      throw std::out_of_range("label " + std::to_string(y) + " of sample " + std::to_string(n) +
                              " is outside [0, " + std::to_string(classes) + ")");
    int argmax = 0;
    for (int c = 1; c < classes; ++c)
      if (z[c] > z[argmax]) argmax = c;
    r.correct += argmax == y;
    double sum = 0;  // shifted by the max so exp() cannot overflow
    for (int c = 0; c < classes; ++c) sum += std::exp(double(z[c]) - double(z[argmax]));
    const double log_sum = std::log(sum) + double(z[argmax]);
    total += log_sum - double(z[y]);
    const double scale = double(weight) / batch;
    for (int c = 0; c < classes; ++c) {
      const double p = std::exp(double(z[c]) - log_sum);
      dz[c] = float(scale * (p - (c == y ? 1.0 : 0.0)));
    }
  }
  r.loss = double(weight) * total / batch;
  return r;
}

}  // namespace ringbench::models
