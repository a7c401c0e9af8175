#include "models/train_buffers.h"

#include <stdexcept>
#include <utility>

#include "base/device_memory.h"
#include "base/errors.h"
#include "models/gpu_dispatch.h"

namespace ringbench::models {

bool TrainBuffers::unscale_if_finite(float inv_scale) {
  if (on_device())
    throw Error("dynamic loss scaling is not implemented for this backend's GPU buffers yet "
                "(use --loss-scale none, or a precision that needs no scaling)");
  float* g = grads();
  const size_t n = param_count();
  // One pass that stays vectorizable: x - x is 0 for every finite x and NaN for inf and NaN.
  float probe = 0;
  for (size_t i = 0; i < n; ++i) probe += g[i] - g[i];
  if (!(probe == 0)) return false;
  for (size_t i = 0; i < n; ++i) g[i] *= inv_scale;
  return true;
}

namespace {

// Host backends: the buffers are host memory, SGD is a loop, and the hooks have nothing to order.
// Parameters, gradients and momentum lie in the network's param_layout(); what goes in and out
// through from_host() and to_host() is plain.
class HostBuffers final : public ArrayTrainBuffers<DeviceVector<float>> {
 public:
  HostBuffers(const Graph& g, ParamLayout layout, const BucketPlan& plan, const SgdOptions& sgd, uint64_t seed)
      : ArrayTrainBuffers(g, [](size_t n, const char* what_for) {
          return DeviceVector<float>(n, DeviceAllocator<float>(what_for));
        }),
        g_(g), layout_(std::move(layout)), plan_(plan), sgd_(sgd) {
    init_params(g, seed, params_.data(), state_.data());
    to_param_layout(layout_, params_.data());
  }
  bool on_device() const override { return false; }
  std::vector<float> to_host(Which w) const override {
    const DeviceVector<float>& v = array(w);
    std::vector<float> out(v.begin(), v.end());
    if (w != Which::state) to_plain_params(layout_, out.data());
    return out;
  }
  void from_host(Which w, const std::vector<float>& v) override {
    check_size(array(w), v);
    std::copy(v.begin(), v.end(), array(w).begin());
    if (w != Which::state) to_param_layout(layout_, array(w).data());
  }
  void update(size_t bucket, bool) override {
    const Bucket& b = plan_.buckets[bucket];
    sgd_update(g_, b.first, b.last, sgd_, params_.data(), grads_.data(), velocity_.data());
  }

 private:
  const Graph& g_;
  const ParamLayout layout_;
  const BucketPlan& plan_;
  SgdOptions sgd_;
};

}  // namespace

std::unique_ptr<TrainBuffers> make_train_buffers(const Network& net, const BucketPlan& plan,
                                                 const SgdOptions& sgd, uint64_t seed) {
  if (!net.on_device()) return std::make_unique<HostBuffers>(net.graph(), net.param_layout(), plan, sgd, seed);
  if (!net.param_layout().plain())
    throw std::logic_error("the " + net.backend() + " backend's GPU buffers cannot hold parameters in a blocked layout");
  return make_gpu_train_buffers(net, plan, sgd, seed);
}

}  // namespace ringbench::models
