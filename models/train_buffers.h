// Where the trainer keeps parameters, gradients, momentum and batch-norm state, and how a
// step's work on them is ordered: the trainer's one difference between host and GPU backends,
// kept out of its loop.
//   Host backends: host memory (DeviceVector, counted against an emulated framebuffer), SGD as
//   a loop (sgd.h), and everything happens in program order: the hooks do nothing.
//   GPU backends (Network::on_device()): cuda::DeviceArray, SGD as a kernel queued on the
//   backend's stream() (models/cuda/sgd_kernels.h, the same arithmetic bit for bit), and a
//   pair of CUDA events per bucket between the compute stream and the communication thread.
//
// Who calls what in a step (b = a bucket of the plan):
//   step thread, in backward's on_param_grads, once b's last gradient kernel is queued:
//       grads_queued(b)             GPU: records "ready[b]" on the compute stream
//     then hands b to the communication thread, which calls
//       wait_grads(b)               GPU: waits for event ready[b] (bounded): b's gradients are final
//       reducer.allreduce_avg(b)
//       reduced(b, reducer.stream())  GPU: records "reduced[b]" on the reducer's stream
//   step thread, after backward:  wait_compute()   GPU: backward has run (for the step's timings)
//   step thread, once the communication thread is done with b:
//       update(b, reduced)          GPU: the compute stream waits for reduced[b], then SGD on b
//   step thread, at the end:      wait_compute()   GPU: the updates have run
// Never a device-wide synchronization: only the compute stream and per-bucket events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "models/bucket_plan.h"
#include "models/network.h"
#include "models/sgd.h"

namespace ringbench::models {

class TrainBuffers {
 public:
  virtual ~TrainBuffers() = default;
  virtual bool on_device() const = 0;
  // The flat buffers in the backend's memory space (what Network::bind() takes).
  virtual float* params() = 0;
  virtual float* grads() = 0;
  virtual float* state() = 0;
  virtual size_t param_count() const = 0;
  virtual size_t state_count() const = 0;
  // A copy in host memory, once the work queued so far has run (tests, the parameter hash).
  enum class Which { params, grads, momentum, state };
  virtual std::vector<float> to_host(Which w) const = 0;
  // Replaces a buffer with `v` (a migrated rank's state); its size must match.
  virtual void from_host(Which w, const std::vector<float>& v) = 0;

  virtual void grads_queued(size_t /*bucket*/) {}
  virtual void wait_grads(size_t /*bucket*/) {}
  // `reducer_stream`: GradientReducer::stream(), nullptr when its result is final on return.
  virtual void reduced(size_t /*bucket*/, void* /*reducer_stream*/) {}
  // SGD on the bucket's tensors; `after_reduce`: wait for reduced(bucket) first.
  virtual void update(size_t bucket, bool after_reduce) = 0;
  virtual void wait_compute() {}
  // On the communication thread, before anything else (GPU: makes the trainer's device current).
  virtual void bind_thread() {}
  // Dynamic loss scaling (loss_scaler.h), once every bucket is reduced and before any update:
  // true when every gradient is finite, and then each is multiplied by `inv_scale` (a power of
  // two: exact); false leaves them as they are (the step is skipped). GPU buffers must order it
  // after every reduced() event; the default refuses device buffers.
  virtual bool unscale_if_finite(float inv_scale);
};

// Buffers kept as four arrays of one kind (DeviceVector<float> on the host, cuda::DeviceArray<float>
// on a GPU), made by make(count, what_for) in the order parameters, gradients, momentum, state.
template <class Array>
class ArrayTrainBuffers : public TrainBuffers {
 public:
  float* params() override { return params_.data(); }
  float* grads() override { return grads_.data(); }
  float* state() override { return state_.data(); }
  size_t param_count() const override { return params_.size(); }
  size_t state_count() const override { return state_.size(); }

 protected:
  template <class Make>
  ArrayTrainBuffers(const Graph& g, Make make)
      : params_(make(g.param_count, "parameters")), grads_(make(g.param_count, "gradients")),
        velocity_(make(g.param_count, "momentum")), state_(make(g.state_count, "batch-norm state")) {}
  const Array& array(Which w) const {
    return w == Which::params ? params_ : w == Which::grads ? grads_ : w == Which::momentum ? velocity_ : state_;
  }
  Array& array(Which w) { return const_cast<Array&>(std::as_const(*this).array(w)); }
  static void check_size(const Array& a, const std::vector<float>& v) {
    if (a.size() != v.size())
      throw std::invalid_argument("restoring " + std::to_string(v.size()) + " values into a buffer of " +
                                  std::to_string(a.size()));
  }

  Array params_, grads_, velocity_, state_;
};

// Allocates the buffers for `net`'s graph in its memory space and fills parameters and state
// with init_params(seed) (on the host, then copied): the same values on every rank and backend.
// `plan` must outlive the buffers.
std::unique_ptr<TrainBuffers> make_train_buffers(const Network& net, const BucketPlan& plan,
                                                 const SgdOptions& sgd, uint64_t seed);

}  // namespace ringbench::models
