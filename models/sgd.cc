#include "models/sgd.h"

namespace ringbench::models {

void sgd_update(const Graph& g, int first, int last, const SgdOptions& o, float* params,
                const float* grads, float* velocity) {
  for (int t = first; t <= last; ++t) {
    const ParamTensor& p = g.params[size_t(t)];
    const float wd = p.decay ? o.weight_decay : 0.0f;
    float* w = params + p.offset;
    const float* dw = grads + p.offset;
    float* v = velocity + p.offset;
    for (size_t i = 0; i < p.numel; ++i) {
      v[i] = o.momentum * v[i] + (dw[i] + wd * w[i]);
      w[i] -= o.lr * v[i];
    }
  }
}

}  // namespace ringbench::models
