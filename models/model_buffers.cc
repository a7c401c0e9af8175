#include "models/model_buffers.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "base/device_memory.h"
#include "base/errors.h"
#include "models/gpu_dispatch.h"

namespace ringbench::models {
namespace {

// The parameters in the network's param_layout() (plain for every inference-only network today).
class HostModelBuffers final : public ModelBuffers {
 public:
  HostModelBuffers(const Network& net, uint64_t seed)
      : params_(net.graph().param_count, DeviceAllocator<float>("parameters")),
        state_(net.graph().state_count, DeviceAllocator<float>("batch-norm state")) {
    init_params(net.graph(), seed, params_.data(), state_.data());
    to_param_layout(net.param_layout(), params_.data());
  }
  HostModelBuffers(const Network& net, const std::vector<float>& params, const std::vector<float>& state)
      : params_(net.graph().param_count, DeviceAllocator<float>("parameters")),
        state_(net.graph().state_count, DeviceAllocator<float>("batch-norm state")) {
    std::copy(params.begin(), params.end(), params_.begin());
    std::copy(state.begin(), state.end(), state_.begin());
    to_param_layout(net.param_layout(), params_.data());
  }
  float* params() override { return params_.data(); }
  float* state() override { return state_.data(); }

 private:
  DeviceVector<float> params_, state_;
};

}  // namespace

std::unique_ptr<ModelBuffers> make_model_buffers(const Network& net, const std::vector<float>& params,
                                                 const std::vector<float>& state) {
  const Graph& g = net.graph();
  if (params.size() != g.param_count || state.size() != g.state_count)
    throw Error(std::to_string(params.size()) + " parameters and " + std::to_string(state.size()) +
                " state values given, but " + g.model + " has " + std::to_string(g.param_count) + " and " +
                std::to_string(g.state_count));
  if (!net.on_device()) return std::make_unique<HostModelBuffers>(net, params, state);
  return make_gpu_model_buffers(net, params, state);
}

std::unique_ptr<ModelBuffers> make_model_buffers(const Network& net, uint64_t seed) {
  if (!net.on_device()) return std::make_unique<HostModelBuffers>(net, seed);
  return make_gpu_model_buffers(net, seed);
}

}  // namespace ringbench::models
