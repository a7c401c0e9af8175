// The data-parallel training loop. Each rank runs forward and backward on its own batch; as
// backward produces each gradient bucket, a communication thread starts averaging it across
// ranks (in the same bucket order on every rank), so communication overlaps the rest of
// backward. The optimizer then updates bucket by bucket, waiting only for the bucket it needs.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/allreduce.h"
#include "models/bucket_plan.h"
#include "models/data.h"
#include "models/device_gate.h"
#include "base/device_memory.h"
#include "models/layer_profile.h"
#include "models/loss_scaler.h"
#include "models/network.h"
#include "models/sgd.h"
#include "models/timeline.h"
#include "models/train_buffers.h"

namespace ringbench::models {

// Averages a range of the flat gradient buffer across ranks, in place (our ring over a
// transport, or MPI_Allreduce; on a GPU backend our ring staged through host memory, or NCCL).
// Only the trainer's communication thread calls it, once the range's gradients are final.
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  virtual void allreduce_avg(size_t offset, size_t count) = 0;
  virtual std::string describe() const = 0;
  // Reducers of device gradient buffers (GPU backends): true. Their result may still be in
  // flight when allreduce_avg returns: it is final once the work queued on stream() (an opaque
  // cudaStream_t) by then has run (the trainer records an event there); nullptr: final on return.
  virtual bool on_device() const { return false; }
  virtual void* stream() const { return nullptr; }
  // The element type the gradients cross the network in (f32, or bf16/f16 when compressed).
  virtual DType wire_dtype() const { return DType::f32; }
};
// Our ring (or, for small buckets, the small-message algorithms) over a transport. `wire` bf16
// or f16: each bucket is cast into a staging buffer of that type, averaged there (every addition
// in fp32, rounded to `wire` as the ring passes it on), and cast back: Horovod's
// Compression.fp16, PyTorch DDP's fp16/bf16_compress_hook, and AMP frameworks' allreduce of
// low-precision gradients. Half the bytes on the wire; the fp32 buffer keeps the result.
std::unique_ptr<GradientReducer> make_ring_reducer(Transport& t, float* grads, size_t count,
                                                   const AllreduceOptions& o, DType wire = DType::f32);

// Makes the reducer for the gradient buffer, in the backend's memory space: device memory when
// Network::on_device() (registration and connection happen here, at setup, never in a step).
using ReducerFactory = std::function<std::unique_ptr<GradientReducer>(float* grads, size_t count)>;

struct TrainOptions {
  int rank = 0, world = 1;
  SgdOptions sgd;                       // lr already scaled with the world size
  size_t first_bucket_bytes = 1 << 20;
  size_t fusion_bytes = 25 << 20;       // 0: one bucket per tensor
  bool overlap = true;                  // false: allreduce every bucket after backward (ablation)
  uint64_t seed = 42;                   // parameters (same on every rank) and dropout
  std::chrono::milliseconds timeout{60000};  // limit on waiting for any bucket
  Timeline* timeline = nullptr;         // record layers and buckets of traced steps
  DeviceGate* gate = nullptr;           // emulated vGPU time slicing of forward, backward, optimizer
  LossScaleOptions loss_scale;          // dynamic loss scaling (fp16's; any precision may use it)
};

struct StepRecord {
  int64_t step = 0;
  double loss = 0;       // this rank's batch loss (weighted sum over outputs)
  int correct = 0;       // this rank's correctly classified samples (first output)
  double step_s = 0;     // wall time of the whole step
  double compute_s = 0;  // forward (with the loss) + backward; without waits for device slices
  double allreduce_s = 0;  // time the communication thread spent in allreduces
  double exposed_s = 0;  // time the step waited for allreduces after backward ended
  double optimizer_s = 0;
  double loss_scale = 1;  // the scale this step's loss gradient was multiplied by (1: none)
  bool skipped = false;   // dynamic loss scaling found inf/NaN gradients: no update this step
  double device_s = 0;       // with a gate: time this job held the device during the step
  double device_wait_s = 0;  // with a gate: time it waited for a slice
  // The step's timeline, as `ringbench predict` replays it: forward (with the loss) and backward
  // (their sum is compute_s, plus any waits for device slices), and per gradient bucket when
  // backward released it, in seconds from backward's start (backward_s for the buckets released
  // after it; GPU: when its kernels were queued), and how long its allreduce took.
  double forward_s = 0, backward_s = 0;
  // CPU time this process used during the step, all its threads together. The kernel adds another
  // thread's run time at its next tick, so over one short step this is approximate; train's
  // "CPUs busy" takes the CPU time over the whole measured window instead.
  double cpu_s = 0;
  std::vector<double> bucket_ready_s, bucket_allreduce_s;
};

class Trainer {
 public:
  // More than one rank: `make_reducer` connects the trainer now, or (empty) connect() does later.
  Trainer(Network& net, const TrainOptions& o, const ReducerFactory& make_reducer);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // trace: record the step's layers and buckets in TrainOptions::timeline; profile: add the
  // step's layer spans to it (both make a GPU backend wait for each layer).
  StepRecord step(BatchSource& data, bool trace = false, LayerProfile* profile = nullptr);
  // Accuracy of the current parameters on `d` in inference mode (all of its samples; the last
  // partial batch is padded and the padding not counted).
  struct Eval {
    int64_t correct = 0, total = 0;
    double loss_sum = 0;
  };
  Eval evaluate(const Dataset& d);

  const BucketPlan& plan() const { return plan_; }
  // Copies in host memory, wherever the backend keeps them (the last step's gradients).
  std::vector<float> host_params() const { return buffers_->to_host(TrainBuffers::Which::params); }
  std::vector<float> host_state() const { return buffers_->to_host(TrainBuffers::Which::state); }
  std::vector<float> host_grads() const { return buffers_->to_host(TrainBuffers::Which::grads); }
  std::vector<float> host_momentum() const { return buffers_->to_host(TrainBuffers::Which::momentum); }
  // Between steps: replaces the gradient reducer with a new one (a ring re-formed around a
  // migrated rank); an empty factory leaves the trainer without one until the next connect().
  void connect(const ReducerFactory& make_reducer);
  // Between steps (train --autotune): the gradient buckets planned anew with these thresholds,
  // and a new reducer from `make_reducer` (its wire type and segment may differ). Host buffers
  // only: a GPU backend's per-bucket events are made once.
  void replan(size_t first_bucket_bytes, size_t fusion_bytes, const ReducerFactory& make_reducer);
  // A migrated rank's state: the step count decides dropout's masks and the next step's number.
  void restore(const std::vector<float>& params, const std::vector<float>& momentum,
               const std::vector<float>& state, int64_t steps_done);
  bool on_device() const { return buffers_->on_device(); }
  std::string reducer() const;
  int64_t steps_done() const { return steps_; }
  const LossScaler& loss_scaler() const { return scaler_; }

 private:
  class Comm;
  void forward_loss(BatchSource& data, StepRecord& r);
  using TimePoint = std::chrono::steady_clock::time_point;
  struct BackwardEnd {
    TimePoint at;        // backward has run
    double sliced_wait;  // seconds of it spent waiting for device slices
  };
  BackwardEnd backward_releasing(StepRecord& r, TimePoint t_fwd, bool trace, double waited_before);
  struct OptimizerTimes {
    double waited = 0;     // for the buckets' averages (exposed communication)
    double optimizer = 0;  // updating the parameters
  };
  OptimizerTimes update_by_bucket(StepRecord& r);
  void name_bucket_tracks(size_t element_bytes);

  Network& net_;
  const Graph& g_;
  TrainOptions o_;
  BucketPlan plan_;
  std::unique_ptr<TrainBuffers> buffers_;  // parameters, gradients, momentum, state; the optimizer
  std::vector<float> images_, scratch_;
  std::vector<int32_t> labels_;
  uint64_t resident_batch_ = 0;  // the fixed batch the network's input holds (0: none)
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<Comm> comm_;
  int64_t steps_ = 0;
  LossScaler scaler_;
};

}  // namespace ringbench::models
