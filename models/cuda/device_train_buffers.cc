#include "models/cuda/device_train_buffers.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda/memory.h"
#include "models/cuda/sgd_kernels.h"

namespace ringbench::models {
namespace {

class DeviceBuffers final : public ArrayTrainBuffers<cuda::DeviceArray<float>> {
 public:
  DeviceBuffers(const Network& net, const BucketPlan& plan, const SgdOptions& sgd, uint64_t seed)
      : ArrayTrainBuffers(net.graph(),
                          [](size_t n, const char* what_for) { return cuda::DeviceArray<float>(n, what_for); }),
        g_(net.graph()), plan_(plan), sgd_(sgd), stream_(static_cast<cudaStream_t>(net.stream())),
        tensor_begin_(g_.params.size() + 1, "optimizer tensor table"),
        tensor_decay_(g_.params.size(), "optimizer tensor table") {
    RB_CUDA(cudaGetDevice(&device_));
    // Parameters and state as every backend starts them (init_params on the host), then copied;
    // gradients and momentum zero. All on the compute stream (which may not synchronize with
    // the legacy default stream), waited for once: this is setup, not a step.
    std::vector<float> p(g_.param_count), s(g_.state_count);
    init_params(g_, seed, p.data(), s.data());
    std::vector<size_t> begin;
    std::vector<float> decay;
    for (const ParamTensor& t : g_.params) {
      if (t.offset != (begin.empty() ? 0 : begin.back() + g_.params[begin.size() - 1].numel))
        throw std::logic_error("parameter tensor " + t.name + " does not follow the previous one in the flat buffer");
      begin.push_back(t.offset);
      decay.push_back(t.decay ? sgd.weight_decay : 0.0f);
    }
    begin.push_back(g_.param_count);
    upload(params_.data(), p.data(), p.size() * sizeof(float));
    upload(state_.data(), s.data(), s.size() * sizeof(float));
    upload(tensor_begin_.data(), begin.data(), begin.size() * sizeof(size_t));
    upload(tensor_decay_.data(), decay.data(), decay.size() * sizeof(float));
    if (grads_.bytes()) RB_CUDA(cudaMemsetAsync(grads_.data(), 0, grads_.bytes(), stream_));
    if (velocity_.bytes()) RB_CUDA(cudaMemsetAsync(velocity_.data(), 0, velocity_.bytes(), stream_));
    for (size_t b = 0; b < plan.buckets.size(); ++b) {
      ready_.push_back(std::make_unique<cuda::Event>());
      reduced_.push_back(std::make_unique<cuda::Event>());
    }
    recorded_.assign(plan.buckets.size(), 0);
    sync();  // the host vectors go out of scope
  }
  ~DeviceBuffers() override {
    // Kernels queued on these buffers (a step that failed half way) finish before they are freed.
    cuda::sync_quietly(stream_);
  }

  bool on_device() const override { return true; }
  std::vector<float> to_host(Which w) const override {
    const cuda::DeviceArray<float>& a = array(w);
    std::vector<float> out(a.size());
    sync();
    if (a.bytes()) {
      RB_CUDA(cudaMemcpyAsync(out.data(), a.data(), a.bytes(), cudaMemcpyDeviceToHost, stream_));
      sync();
    }
    return out;
  }
  void from_host(Which w, const std::vector<float>& v) override {
    cuda::DeviceArray<float>& a = array(w);
    check_size(a, v);
    sync();
    if (a.bytes()) {
      RB_CUDA(cudaMemcpyAsync(a.data(), v.data(), a.bytes(), cudaMemcpyHostToDevice, stream_));
      sync();
    }
  }

  void grads_queued(size_t b) override { ready_[b]->record(stream_); }
  void wait_grads(size_t b) override { ready_[b]->sync(); }
  void reduced(size_t b, void* reducer_stream) override {
    // Read by update() on the step thread after the trainer's hand-off (a mutex) of bucket b.
    recorded_[b] = reducer_stream != nullptr;
    if (reducer_stream) reduced_[b]->record(static_cast<cudaStream_t>(reducer_stream));
  }
  void update(size_t bucket, bool after_reduce) override {
    if (after_reduce && recorded_[bucket]) reduced_[bucket]->wait_on(stream_);
    const Bucket& b = plan_.buckets[bucket];
    cuda_kernels::sgd_update(params_.data(), grads_.data(), velocity_.data(),
                             {tensor_begin_.data(), tensor_decay_.data()}, b.first, b.last, b.offset,
                             b.offset + b.count, sgd_.lr, sgd_.momentum, stream_);
  }
  // After every bucket's reduction; one flag read back (a host sync, as the host check has).
  bool unscale_if_finite(float inv_scale) override {
    for (size_t b = 0; b < reduced_.size(); ++b)
      if (recorded_[b]) reduced_[b]->wait_on(stream_);
    RB_CUDA(cudaMemsetAsync(nonfinite_.data(), 0, sizeof(int), stream_));
    cuda_kernels::flag_nonfinite(grads_.data(), grads_.size(), nonfinite_.data(), stream_);
    int nonfinite = 0;
    RB_CUDA(cudaMemcpyAsync(&nonfinite, nonfinite_.data(), sizeof(int), cudaMemcpyDeviceToHost, stream_));
    sync();
    if (nonfinite) return false;
    cuda_kernels::scale(grads_.data(), grads_.size(), inv_scale, stream_);
    return true;
  }
  void wait_compute() override { sync(); }
  void bind_thread() override { RB_CUDA(cudaSetDevice(device_)); }

 private:
  void sync() const { cuda::wait_done([this] { return cudaStreamQuery(stream_); }, "waiting for the compute stream"); }
  void upload(void* dst, const void* src, size_t bytes) {
    if (bytes) RB_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
  }

  const Graph& g_;
  const BucketPlan& plan_;
  SgdOptions sgd_;
  cudaStream_t stream_;
  int device_ = 0;
  cuda::DeviceArray<size_t> tensor_begin_;
  cuda::DeviceArray<float> tensor_decay_;
  cuda::DeviceArray<int> nonfinite_{1, "loss-scaling flag"};
  std::vector<std::unique_ptr<cuda::Event>> ready_, reduced_;  // per bucket
  std::vector<char> recorded_;  // per bucket: reduced_ was recorded this step
};

class DeviceModelBuffers final : public ModelBuffers {
 public:
  DeviceModelBuffers(const Network& net, uint64_t seed)
      : params_(net.graph().param_count, "parameters"), state_(net.graph().state_count, "batch-norm state") {
    std::vector<float> p(params_.size()), s(state_.size());
    init_params(net.graph(), seed, p.data(), s.data());
    upload(net, p, s);
  }
  DeviceModelBuffers(const Network& net, const std::vector<float>& p, const std::vector<float>& s)
      : params_(net.graph().param_count, "parameters"), state_(net.graph().state_count, "batch-norm state") {
    upload(net, p, s);
  }
  float* params() override { return params_.data(); }
  float* state() override { return state_.data(); }

 private:
  // On the network's compute stream, waited for before the host vectors can go.
  void upload(const Network& net, const std::vector<float>& p, const std::vector<float>& s) {
    const auto stream = static_cast<cudaStream_t>(net.stream());
    if (!p.empty()) RB_CUDA(cudaMemcpyAsync(params_.data(), p.data(), p.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
    if (!s.empty()) RB_CUDA(cudaMemcpyAsync(state_.data(), s.data(), s.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
    cuda::wait_done([stream] { return cudaStreamQuery(stream); }, "uploading the parameters");
  }

  cuda::DeviceArray<float> params_, state_;
};

}  // namespace

std::unique_ptr<ModelBuffers> make_device_model_buffers(const Network& net, uint64_t seed) {
  return std::make_unique<DeviceModelBuffers>(net, seed);
}

std::unique_ptr<ModelBuffers> make_device_model_buffers(const Network& net, const std::vector<float>& params,
                                                        const std::vector<float>& state) {
  return std::make_unique<DeviceModelBuffers>(net, params, state);
}

std::unique_ptr<TrainBuffers> make_device_train_buffers(const Network& net, const BucketPlan& plan,
                                                        const SgdOptions& sgd, uint64_t seed) {
  return std::make_unique<DeviceBuffers>(net, plan, sgd, seed);
}

}  // namespace ringbench::models
