#include "models/model_buffers.h"

#include <stdexcept>

#include "base/device_memory.h"
#include "ringbench/config.h"

#if RINGBENCH_HAVE_CUDA
#include "models/cuda/device_train_buffers.h"
#endif

namespace ringbench::models {
namespace {

class HostModelBuffers final : public ModelBuffers {
 public:
  HostModelBuffers(const Graph& g, uint64_t seed)
      : params_(g.param_count, DeviceAllocator<float>("parameters")),
        state_(g.state_count, DeviceAllocator<float>("batch-norm state")) {
    init_params(g, seed, params_.data(), state_.data());
  }
  float* params() override { return params_.data(); }
  float* state() override { return state_.data(); }

 private:
  DeviceVector<float> params_, state_;
};

}  // namespace

std::unique_ptr<ModelBuffers> make_model_buffers(const Network& net, uint64_t seed) {
  if (!net.on_device()) return std::make_unique<HostModelBuffers>(net.graph(), seed);
#if RINGBENCH_HAVE_CUDA
  return make_device_model_buffers(net, seed);
#else
  throw std::invalid_argument("the " + net.backend() + " backend computes on a GPU, but this ringbench was "
                              "built without CUDA (RINGBENCH_WITH_CUDA=OFF)");
#endif
}

}  // namespace ringbench::models
