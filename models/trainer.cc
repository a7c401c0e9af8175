#include "models/trainer.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "base/cpu_time.h"
#include "base/errors.h"
#include "collectives/reduce.h"
#include "models/loss.h"
#include "models/wire_staged_reducer.h"

namespace ringbench::models {

namespace {
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

std::unique_ptr<GradientReducer> make_ring_reducer(Transport& t, float* grads, size_t count,
                                                   const AllreduceOptions& o, DType wire) {
  return std::make_unique<WireStagedReducer<Allreduce>>(
      grads, count, wire, "ring (ours) over " + t.caps().name,
      [&](void* buf) { return Allreduce(t, buf, buf, count, wire, ReduceOp::avg, o); });
}

// The communication thread: allreduces buckets in the order they were enqueued (the same on
// every rank, since backward produces them in the same order everywhere).
namespace {

// Leaves the device however a gated region ends: an error while holding it must not starve the
// other VMs until the trainer is destroyed. Set g to nullptr once the region left it itself.
struct LeaveOnError {
  DeviceGate* g;
  ~LeaveOnError() {
    try {
      if (g) g->leave();
    } catch (...) {  // the region's own error is the one to report
    }
  }
};

}  // namespace

class Trainer::Comm {
 public:
  Comm(GradientReducer& r, TrainBuffers& buffers, const BucketPlan& plan, Timeline* tl)
      : reducer_(r), buffers_(buffers), plan_(plan), timeline_(tl), done_(plan.buckets.size(), false),
        thread_([this] { loop(); }) {}
  ~Comm() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void begin_step(bool trace) {
    std::lock_guard lk(mu_);
    std::fill(done_.begin(), done_.end(), false);
    std::fill(bucket_s_.begin(), bucket_s_.end(), 0.0);
    busy_s_ = 0;
    trace_ = trace;
  }
  void enqueue(size_t b) {
    {
      std::lock_guard lk(mu_);
      queue_.push_back(b);
    }
    cv_.notify_all();
  }
  void wait(size_t b, std::chrono::milliseconds timeout) {
    std::unique_lock lk(mu_);
    if (!done_cv_.wait_for(lk, timeout, [&] { return done_[b] || error_; }))
      throw Error("gradient bucket " + std::to_string(b) + " was not allreduced within " +
                               std::to_string(timeout.count()) + " ms");
    if (error_) std::rethrow_exception(error_);
  }
  double busy_seconds() {
    std::lock_guard lk(mu_);
    return busy_s_;
  }
  std::vector<double> bucket_seconds() {
    std::lock_guard lk(mu_);
    return bucket_s_;
  }

 private:
  void loop() {
    std::unique_lock lk(mu_);
    try {
      buffers_.bind_thread();
    } catch (...) {
      error_ = std::current_exception();
      done_cv_.notify_all();
      return;
    }
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      const size_t b = queue_.front();
      queue_.pop_front();
      const bool trace = trace_;
      lk.unlock();
      const Bucket& bk = plan_.buckets[b];
      std::exception_ptr err;
      auto t0 = Clock::now(), t1 = t0;
      try {
        buffers_.wait_grads(b);  // GPU: until backward's kernels for this bucket have run
        t0 = Clock::now();
        reducer_.allreduce_avg(bk.offset, bk.count);
        t1 = Clock::now();
        buffers_.reduced(b, reducer_.stream());
      } catch (...) {
        err = std::current_exception();
        t1 = Clock::now();
      }
      if (trace && timeline_)
        timeline_->add(int(10 + b), "allreduce bucket " + std::to_string(b), "allreduce", t0, t1);
      lk.lock();
      busy_s_ += seconds(t0, t1);
      bucket_s_[b] = seconds(t0, t1);
      done_[b] = true;
      if (err && !error_) error_ = err;
      done_cv_.notify_all();
      if (error_) return;  // a failed collective leaves the transport aborted
    }
  }

  GradientReducer& reducer_;
  TrainBuffers& buffers_;
  const BucketPlan& plan_;
  Timeline* timeline_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<size_t> queue_;
  std::vector<bool> done_;
  std::vector<double> bucket_s_ = std::vector<double>(plan_.buckets.size(), 0.0);
  double busy_s_ = 0;
  bool trace_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts after everything it uses
};

Trainer::Trainer(Network& net, const TrainOptions& o, const ReducerFactory& make_reducer)
    : net_(net), g_(net.graph()), o_(o),
      plan_(plan_buckets(g_, o.first_bucket_bytes, o.fusion_bytes)),
      buffers_(make_train_buffers(net, plan_, o.sgd, o.seed)),
      scaler_(o.loss_scale) {
  net_.bind(buffers_->params(), buffers_->grads(), buffers_->state());
  net_.set_gate(o.gate);
  const int b = net_.batch();
  images_.resize(size_t(b) * size_t(g_.input_dims().numel()));
  labels_.resize(size_t(b));
  if (o.timeline) {
    o.timeline->name_track(0, "compute");
    o.timeline->name_track(1, "step");
    name_bucket_tracks(sizeof(float));  // renamed by connect() with the wire's element size
  }
  if (o.world > 1 && make_reducer) connect(make_reducer);  // else: connect() before the first step
}

Trainer::~Trainer() = default;

void Trainer::connect(const ReducerFactory& make_reducer) {
  comm_.reset();  // its thread is idle between steps
  reducer_.reset();
  if (!make_reducer) return;
  reducer_ = make_reducer(buffers_->grads(), buffers_->param_count());
  if (reducer_->on_device() != buffers_->on_device())
    throw std::invalid_argument("the gradient reducer (" + reducer_->describe() + ") works on " +
                                (reducer_->on_device() ? "GPU" : "host") + " memory, but the " + net_.backend() +
                                " backend keeps its gradients in " + (buffers_->on_device() ? "GPU" : "host") +
                                " memory");
  comm_ = std::make_unique<Comm>(*reducer_, *buffers_, plan_, o_.timeline);
  name_bucket_tracks(dtype_size(reducer_->wire_dtype()));
}

void Trainer::replan(size_t first_bucket_bytes, size_t fusion_bytes, const ReducerFactory& make_reducer) {
  if (buffers_->on_device()) throw std::logic_error("Trainer::replan: GPU buffers' per-bucket events are made once");
  comm_.reset();  // it and the buffers refer to plan_
  reducer_.reset();
  o_.first_bucket_bytes = first_bucket_bytes;
  o_.fusion_bytes = fusion_bytes;
  plan_ = plan_buckets(g_, first_bucket_bytes, fusion_bytes);
  name_bucket_tracks(sizeof(float));
  connect(make_reducer);
}

// A bucket's track names the bytes it puts on the wire (2 per element when compressed).
void Trainer::name_bucket_tracks(size_t element_bytes) {
  if (!o_.timeline) return;
  for (size_t i = 0; i < plan_.buckets.size(); ++i)
    o_.timeline->name_track(int(10 + i), "allreduce bucket " + std::to_string(i) + " (" +
                                             std::to_string(plan_.buckets[i].count * element_bytes) + " B)");
}

void Trainer::restore(const std::vector<float>& params, const std::vector<float>& momentum,
                      const std::vector<float>& state, int64_t steps_done) {
  buffers_->from_host(TrainBuffers::Which::params, params);
  buffers_->from_host(TrainBuffers::Which::momentum, momentum);
  buffers_->from_host(TrainBuffers::Which::state, state);
  steps_ = steps_done;
}

std::string Trainer::reducer() const { return reducer_ ? reducer_->describe() : "none (1 rank)"; }

void Trainer::forward_loss(BatchSource& data, StepRecord& r) {
  const uint64_t fixed = data.fixed_batch_id();
  if (fixed == 0 || fixed != resident_batch_) {
    data.next(images_.data(), labels_.data());
    net_.set_input(images_.data());
    resident_batch_ = fixed;
  }
  net_.forward({.training = true, .seed = o_.seed, .step = uint64_t(steps_),
                .sample_offset = int64_t(o_.rank) * net_.batch()});
  for (size_t i = 0; i < g_.outputs.size(); ++i) {
    const int classes = g_.output_node(i).out.c;
    scratch_.resize(size_t(net_.batch()) * size_t(classes) * 2);
    float* logits = scratch_.data();
    float* dlogits = logits + size_t(net_.batch()) * size_t(classes);
    net_.get_output(i, logits);
    LossResult l = softmax_xent(logits, labels_.data(), net_.batch(), classes,
                                g_.outputs[i].loss_weight, dlogits);
    if (scaler_.enabled()) {  // the loss stays fp32 and unscaled; its gradient carries the scale
      const float s = float(scaler_.scale());
      for (size_t k = 0, n = size_t(net_.batch()) * size_t(classes); k < n; ++k) dlogits[k] *= s;
    }
    net_.set_output_grad(i, dlogits);
    r.loss += l.loss;
    if (i == 0) r.correct = l.correct;
  }
}

// Backward: hand each bucket to the communication thread as soon as its lowest tensor's
// gradient is final (on a GPU: queued; the communication thread waits for it to run). When
// each bucket became final is recorded with or without ranks to reduce it. `waited_before`:
// the gate's waited_s when the step began.
Trainer::BackwardEnd Trainer::backward_releasing(StepRecord& r, Clock::time_point t_fwd, bool trace,
                                                 double waited_before) {
  DeviceGate* gate = o_.gate;
  size_t next = 0, final_buckets = 0;
  r.bucket_ready_s.assign(plan_.buckets.size(), 0.0);
  auto release = [&](size_t b) {
    buffers_->grads_queued(b);
    comm_->enqueue(b);
  };
  if (comm_) comm_->begin_step(trace);
  net_.backward([&](int node) {
    if (g_.nodes[size_t(node)].params.empty()) return;
    const int lowest = g_.nodes[size_t(node)].params.front();
    for (; final_buckets < plan_.buckets.size() && plan_.buckets[final_buckets].first >= lowest; ++final_buckets)
      r.bucket_ready_s[final_buckets] = seconds(t_fwd, Clock::now());
    if (comm_ && o_.overlap)
      while (next < final_buckets) release(next++);
  });
  buffers_->wait_compute();  // GPU: backward has run, so compute and exposed time mean the same
  const auto t_bwd = Clock::now();
  for (; final_buckets < plan_.buckets.size(); ++final_buckets) r.bucket_ready_s[final_buckets] = seconds(t_fwd, t_bwd);
  // Time sliced, the waits for slices (in enter and at the layers' checkpoints) are not compute.
  const double sliced_wait = gate ? gate->usage().waited_s - waited_before : 0;
  if (comm_)
    while (next < plan_.buckets.size()) release(next++);
  return {t_bwd, sliced_wait};
}

// Optimizer, bucket by bucket as each bucket's average arrives. Time sliced, a job must not
// hold the device while it waits for the network: it waits for every bucket first. So does
// dynamic loss scaling, which must see every averaged gradient before it updates any.
Trainer::OptimizerTimes Trainer::update_by_bucket(StepRecord& r) {
  DeviceGate* gate = o_.gate;
  OptimizerTimes t;
  if ((gate || scaler_.enabled()) && comm_) {
    if (gate) gate->leave();
    const auto w0 = Clock::now();
    for (size_t b = 0; b < plan_.buckets.size(); ++b) comm_->wait(b, o_.timeout);
    t.waited += seconds(w0, Clock::now());
    if (gate) gate->enter();
  }
  if (scaler_.enabled()) {
    r.loss_scale = scaler_.scale();
    const auto u0 = Clock::now();
    r.skipped = !buffers_->unscale_if_finite(float(1 / scaler_.scale()));
    scaler_.update(!r.skipped);
    t.optimizer += seconds(u0, Clock::now());
    if (r.skipped) return t;
  }
  for (size_t b = 0; b < plan_.buckets.size(); ++b) {
    const auto w0 = Clock::now();
    if (comm_) comm_->wait(b, o_.timeout);
    const auto w1 = Clock::now();
    if (gate) gate->checkpoint();  // a wait for the next slice counts in device_wait_s only
    const auto w2 = Clock::now();
    buffers_->update(b, comm_ != nullptr);  // GPU: queued after the bucket's reduction
    t.waited += seconds(w0, w1);
    t.optimizer += seconds(w2, Clock::now());
  }
  const auto o0 = Clock::now();
  buffers_->wait_compute();  // GPU: the updates have run
  t.optimizer += seconds(o0, Clock::now());
  return t;
}

StepRecord Trainer::step(BatchSource& data, bool trace, LayerProfile* profile) {
  if (o_.world > 1 && !comm_) throw std::logic_error("a multi-rank step without a gradient reducer (connect())");
  StepRecord r;
  r.step = steps_;
  Timeline* tl = trace ? o_.timeline : nullptr;
  if (tl || profile)
    net_.set_trace([&](int node, Phase ph, Clock::time_point b, Clock::time_point e) {
      if (tl) tl->add(0, g_.nodes[size_t(node)].name, ph == Phase::forward ? "forward" : "backward", b, e);
      if (profile) profile->add(node, ph, seconds(b, e));
    });
  struct ClearTrace {  // the callback refers to this frame: never leave it behind, even on errors
    Network& net;
    bool set;
    ~ClearTrace() { if (set) net.set_trace({}); }
  } clear_trace{net_, tl || profile};
  DeviceGate* gate = o_.gate;
  const DeviceGate::Usage u0 = gate ? gate->usage() : DeviceGate::Usage{};
  LeaveOnError holding{gate};
  const auto t0 = Clock::now();
  const double cpu0 = process_cpu_seconds();
  if (gate) gate->enter();
  forward_loss(data, r);
  const auto t_fwd = Clock::now();

  const auto [t_bwd, sliced_wait] = backward_releasing(r, t_fwd, trace, u0.waited_s);
  const auto [waited, optimizer] = update_by_bucket(r);
  if (gate) {
    holding.g = nullptr;
    gate->leave();
    const DeviceGate::Usage u1 = gate->usage();
    r.device_s = u1.held_s - u0.held_s;
    r.device_wait_s = u1.waited_s - u0.waited_s;
  }
  const auto t_end = Clock::now();
  r.cpu_s = std::max(0.0, process_cpu_seconds() - cpu0);
  if (tl) tl->add(1, "step " + std::to_string(steps_), "step", t0, t_end);
  r.step_s = seconds(t0, t_end);
  r.compute_s = seconds(t0, t_bwd) - sliced_wait;
  r.forward_s = seconds(t0, t_fwd);
  r.backward_s = seconds(t_fwd, t_bwd);
  r.allreduce_s = comm_ ? comm_->busy_seconds() : 0;
  if (comm_) r.bucket_allreduce_s = comm_->bucket_seconds();
  r.exposed_s = waited;
  r.optimizer_s = optimizer;
  if (profile) profile->end_step(r.step_s);
  ++steps_;
  return r;
}

Trainer::Eval Trainer::evaluate(const Dataset& d) {
  Eval e;
  const int b = net_.batch();
  const size_t per = size_t(d.dims.numel());
  if (!(d.dims == g_.input_dims()))
    throw std::invalid_argument("dataset images are " + to_string(d.dims) + " but the model takes " +
                                to_string(g_.input_dims()));
  const int classes = g_.output_node(0).out.c;
  std::vector<float> logits(size_t(b) * size_t(classes)), dlogits(logits.size());
  for (size_t first = 0; first < d.size(); first += size_t(b)) {
    const size_t n = std::min(size_t(b), d.size() - first);
    for (size_t i = 0; i < size_t(b); ++i) {  // pad a partial batch with its first sample
      const size_t src = first + (i < n ? i : 0);
      std::copy_n(d.images.data() + src * per, per, images_.data() + i * per);
      labels_[i] = d.labels[src];
    }
    net_.set_input(images_.data());
    resident_batch_ = 0;
    if (o_.gate) o_.gate->enter();  // time sliced like training (the layers checkpoint)
    LeaveOnError holding{o_.gate};
    net_.forward({.training = false, .seed = o_.seed, .step = 0, .sample_offset = 0});
    net_.get_output(0, logits.data());
    holding.g = nullptr;
    if (o_.gate) o_.gate->leave();
    for (size_t i = 0; i < n; ++i) {
      const float* z = logits.data() + i * size_t(classes);
      const int pred = int(std::max_element(z, z + classes) - z);
      e.correct += pred == labels_[i];
      LossResult l = softmax_xent(z, &labels_[i], 1, classes, 1.0f, dlogits.data());
      e.loss_sum += l.loss;
    }
    e.total += int64_t(n);
  }
  return e;
}

}  // namespace ringbench::models
