#include "models/model_buffers.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "base/errors.h"

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
  HostModelBuffers(const Graph& g, const std::vector<float>& params, const std::vector<float>& state)
      : params_(g.param_count, DeviceAllocator<float>("parameters")),
        state_(g.state_count, DeviceAllocator<float>("batch-norm state")) {
    std::copy(params.begin(), params.end(), params_.begin());
    std::copy(state.begin(), state.end(), state_.begin());
  }
  float* params() override { return params_.data(); }
  float* state() override { return state_.data(); }

 private:
  DeviceVector<float> params_, state_;
};

[[maybe_unused]] std::string no_cuda(const Network& net) {
  return "the " + net.backend() + " backend computes on a GPU, but this ringbench was built without CUDA "
         "(RINGBENCH_WITH_CUDA=OFF)";
}

}  // namespace

std::unique_ptr<ModelBuffers> make_model_buffers(const Network& net, const std::vector<float>& params,
                                                 const std::vector<float>& state) {
  const Graph& g = net.graph();
  if (params.size() != g.param_count || state.size() != g.state_count)
    throw Error(std::to_string(params.size()) + " parameters and " + std::to_string(state.size()) +
                " state values given, but " + g.model + " has " + std::to_string(g.param_count) + " and " +
                std::to_string(g.state_count));
  if (!net.on_device()) return std::make_unique<HostModelBuffers>(g, params, state);
#if RINGBENCH_HAVE_CUDA
  return make_device_model_buffers(net, params, state);
#else
  throw std::invalid_argument(no_cuda(net));
#endif
}

std::unique_ptr<ModelBuffers> make_model_buffers(const Network& net, uint64_t seed) {
  if (!net.on_device()) return std::make_unique<HostModelBuffers>(net.graph(), seed);
#if RINGBENCH_HAVE_CUDA
  return make_device_model_buffers(net, seed);
#else
  throw std::invalid_argument(no_cuda(net));
#endif
}

}  // namespace ringbench::models
