// The training loop's parts (loss, SGD, bucket plan) and its data-parallel contract: N ranks
// with batch b each reach the same weights as one rank with batch N*b.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "collectives/reduce.h"
#include "models/bucket_plan.h"
#include "base/device_memory.h"
#include "models/loss.h"
#include "models/network.h"
#include "models/sgd.h"
#include "models/trainer.h"
#include "models/zoo.h"
#include "train_helpers.h"

namespace m = ringbench::models;

using namespace ringbench::testing;  // train_helpers.h, rank_threads.h

TEST(Loss, SoftmaxCrossEntropyValuesAndGradient) {
  const float logits[6] = {1, 2, 3, 0, 0, 0};
  const int32_t labels[2] = {2, 1};
  float d[6];
  m::LossResult r = m::softmax_xent(logits, labels, 2, 3, 1.0f, d);
  const double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0, l1 = std::log(3.0);
  EXPECT_NEAR(r.loss, (l0 + l1) / 2, 1e-6);
  EXPECT_EQ(r.correct, 1);  // sample 1 ties: argmax is class 0, label 1
  // Central differences of the batch-mean loss.
  for (int i = 0; i < 6; ++i) {
    float p[6], q[6], dd[6];
    std::copy(logits, logits + 6, p);
    std::copy(logits, logits + 6, q);
    p[i] += 1e-3f;
    q[i] -= 1e-3f;
    const double num = (m::softmax_xent(p, labels, 2, 3, 1.0f, dd).loss -
                        m::softmax_xent(q, labels, 2, 3, 1.0f, dd).loss) / 2e-3;
    EXPECT_NEAR(d[i], num, 1e-3) << "logit " << i;
  }
  // The weight scales loss and gradient (Inception's aux head has 0.4).
  float dw[6];
  EXPECT_NEAR(m::softmax_xent(logits, labels, 2, 3, 0.4f, dw).loss, 0.4 * r.loss, 1e-6);
  EXPECT_NEAR(dw[0], 0.4f * d[0], 1e-7);
  const int32_t bad[2] = {3, 0};
  EXPECT_THROW(m::softmax_xent(logits, bad, 2, 3, 1.0f, d), std::out_of_range);
}

TEST(Sgd, MomentumAndDecayOnWeightsOnly) {
  m::Graph g;
  int x = g.input({1, 1, 2});
  g.fc(x, "fc", {.out_features = 1, .bias = true});  // weight [1,2] (decayed), bias [1] (not)
  std::vector<float> w = {1.0f, -2.0f, 0.5f}, grad = {0.1f, 0.2f, 0.3f}, v = {0.5f, 0.0f, 1.0f};
  m::sgd_update(g, 0, 1, {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f}, w.data(), grad.data(), v.data());
  EXPECT_FLOAT_EQ(v[0], 0.9f * 0.5f + 0.1f + 0.01f * 1.0f);
  EXPECT_FLOAT_EQ(w[0], 1.0f - 0.1f * v[0]);
  EXPECT_FLOAT_EQ(v[1], 0.2f + 0.01f * -2.0f);
  EXPECT_FLOAT_EQ(v[2], 0.9f * 1.0f + 0.3f);  // bias: no decay
  EXPECT_FLOAT_EQ(w[2], 0.5f - 0.1f * v[2]);
}

TEST(BucketPlan, ContiguousRangesInBackpropOrder) {
  const m::Graph g = small_cnn();
  for (size_t fusion : {size_t(0), size_t(64), size_t(1) << 10, size_t(25) << 20}) {
    const m::BucketPlan p = m::plan_buckets(g, 128, fusion);
    size_t end = g.param_count;  // buckets walk the flat buffer from its end to its start
    int next_tensor = int(g.params.size()) - 1;
    for (const m::Bucket& b : p.buckets) {
      EXPECT_EQ(b.offset + b.count, end);
      EXPECT_EQ(b.last, next_tensor);
      EXPECT_LE(b.first, b.last);
      EXPECT_EQ(b.offset, g.params[size_t(b.first)].offset);
      end = b.offset;
      next_tensor = b.first - 1;
    }
    EXPECT_EQ(end, 0u);
    EXPECT_EQ(next_tensor, -1);
    if (fusion == 0) {
      EXPECT_EQ(p.buckets.size(), g.params.size());
    }
    if (fusion == (size_t(25) << 20)) {
      EXPECT_EQ(p.buckets.size(), 2u);  // the first bucket, then all the rest
    }
  }
  // Thresholds: every closed bucket but the last reached its threshold, and dropping its last
  // tensor would have kept it below.
  const m::BucketPlan p = m::plan_buckets(g, 128, 1024);
  for (size_t i = 0; i + 1 < p.buckets.size(); ++i) {
    const size_t cap = i == 0 ? 128 : 1024;
    const m::Bucket& b = p.buckets[i];
    EXPECT_GE(b.count * 4, cap);
    EXPECT_LT((b.count - g.params[size_t(b.first)].numel) * 4, cap);
  }
}

// The backends' allocator with a cap (an emulated vGPU framebuffer): an allocation past it throws
// with the numbers and changes nothing; a network that does not fit fails while it is built.
TEST(DeviceMemory, CapRejectsOverCapAllocations) {
  auto& mem = ringbench::DeviceMemory::instance();
  const size_t base = mem.in_use();
  mem.set_cap(base + (1 << 20));
  {
    ringbench::DeviceBuffer a((512 << 10), "a");
    try {
      ringbench::DeviceBuffer b((600 << 10), "activations of conv1");
      ADD_FAILURE() << "an allocation past the cap succeeded";
    } catch (const ringbench::DeviceOutOfMemory& e) {
      EXPECT_EQ(e.requested, size_t(600 << 10));
      EXPECT_EQ(e.in_use, base + (512 << 10));
      EXPECT_EQ(e.cap, base + (1 << 20));
      EXPECT_NE(std::string(e.what()).find("activations of conv1"), std::string::npos) << e.what();
    }
    EXPECT_EQ(mem.in_use(), base + (512 << 10));
    ringbench::DeviceBuffer c((512 << 10), "fits exactly");
    EXPECT_EQ(mem.in_use(), base + (1 << 20));
    EXPECT_GE(mem.peak(), base + (1 << 20));
  }
  EXPECT_EQ(mem.in_use(), base);
  const m::Graph g = m::build_model("lenet", {});
  mem.set_cap(mem.in_use() + (1 << 20));  // LeNet's activations at batch 64 need far more
  EXPECT_THROW(m::make_network("reference", g, 64), ringbench::DeviceOutOfMemory);
  EXPECT_EQ(mem.in_use(), base) << "a failed build must free what it allocated";
  mem.set_cap(0);
  EXPECT_NO_THROW(m::make_network("reference", g, 64));
}

// A gate sees the trainer enter before forward, checkpoint between layers and leave after the
// optimizer, and the step records the time it held the device.
TEST(Trainer, GateWrapsEveryStepsDeviceWork) {
  struct CountingGate : m::DeviceGate {
    int enters = 0, leaves = 0, checkpoints = 0, inside = 0;
    bool nested = false, outside_checkpoint = false;
    void enter() override { nested |= inside++ > 0, ++enters; }
    void checkpoint() override { outside_checkpoint |= inside == 0, ++checkpoints; }
    void leave() override { --inside, ++leaves; }
    Usage usage() const override { return {0.001 * enters, 0, enters}; }
  } gate;
  const m::Graph g = m::build_model("lenet", {});
  auto net = m::make_network("reference", g, 2);
  m::TrainOptions o;
  o.gate = &gate;
  m::Trainer t(*net, o, nullptr);
  SliceSource src(g.input_dims(), g.output_node().out.c, 2, 0);
  const m::StepRecord r = t.step(src);
  EXPECT_EQ(gate.enters, 1);
  EXPECT_EQ(gate.leaves, 1);
  EXPECT_FALSE(gate.nested);
  EXPECT_FALSE(gate.outside_checkpoint);
  EXPECT_GE(gate.checkpoints, 2 * int(g.nodes.size() - 1));  // every layer, forward and backward
  EXPECT_DOUBLE_EQ(r.device_s, 0.001);
}

TEST(Trainer, LossFallsOnAFixedBatch) {
  const m::Graph g = small_cnn();
  auto net = m::make_network("reference", g, 8);
  m::TrainOptions o;
  o.sgd.lr = 0.05f;
  m::Trainer t(*net, o, nullptr);
  auto src = m::make_synthetic_source(g.input_dims(), 5, 8, 1, 0);
  const double first = t.step(*src).loss;
  double last = first;
  for (int i = 0; i < 15; ++i) last = t.step(*src).loss;
  EXPECT_LT(last, 0.5 * first) << "15 SGD steps on one batch should at least halve its loss";
}

// Forwards a source, counting next(); `fixed` false hides that the batch never changes.
class CountingSource : public m::BatchSource {
 public:
  CountingSource(m::BatchSource& s, bool fixed) : s_(s), fixed_(fixed) {}
  void next(float* images, int32_t* labels) override { ++calls, s_.next(images, labels); }
  std::string describe() const override { return s_.describe(); }
  uint64_t fixed_batch_id() const override { return fixed_ ? s_.fixed_batch_id() : 0; }
  int calls = 0;

 private:
  m::BatchSource& s_;
  bool fixed_;
};

// Synthetic data is copied to the network once, like a benchmark's batch kept on the device,
// and trains exactly as if it were copied every step; evaluation's batches replace it.
TEST(Trainer, FixedBatchIsCopiedOnceAndTrainsTheSame) {
  const m::Graph g = small_cnn();
  auto src = m::make_synthetic_source(g.input_dims(), 5, 4, 1, 0);
  ASSERT_NE(src->fixed_batch_id(), 0u);
  EXPECT_NE(src->fixed_batch_id(), m::make_synthetic_source(g.input_dims(), 5, 4, 1, 0)->fixed_batch_id());
  std::vector<std::vector<float>> params;
  for (bool fixed : {true, false}) {
    auto net = m::make_network("reference", g, 4);
    m::TrainOptions o;
    o.sgd.lr = 0.05f;
    m::Trainer t(*net, o, nullptr);
    CountingSource counting(*src, fixed);
    for (int i = 0; i < 4; ++i) t.step(counting);
    EXPECT_EQ(counting.calls, fixed ? 1 : 4);
    params.push_back(t.host_params());
    if (!fixed) continue;
    m::Dataset d{g.input_dims(), 5, std::vector<float>(size_t(g.input_dims().numel()) * 3, 0.5f), {0, 1, 2}};
    t.evaluate(d);
    t.step(counting);
    EXPECT_EQ(counting.calls, 2) << "after evaluate() the network's input holds another batch";
  }
  EXPECT_EQ(params[0], params[1]);
}

class DataParallel : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

// N ranks x batch b == 1 rank x batch N*b: same data, same dropout masks, same averaged
// gradients up to float summation order.
TEST_P(DataParallel, SameWeightsAsOneRankWithTheGlobalBatch) {
  const auto [n, fusion] = GetParam();
  const m::Graph g = small_cnn();
  const m::TrainOptions o = data_parallel_options(fusion);
  const int b = 3, steps = 4;
  const auto one = train_single(g, "reference", n * b, steps, o);
  const auto many = train_ranks(g, "reference", n, b, steps, o);
  const auto start = train_single(g, "reference", n * b, 0, o);
  EXPECT_GT(max_rel_diff(one, start), 1e-2) << "training must have moved the weights";
  EXPECT_LT(max_rel_diff(one, many), 2e-6);
}

// The same contract on the oneDNN backend (its kernels may sum in another order at another
// batch size, hence the looser bound).
TEST(DataParallelOnednn, SameWeightsAsOneRankWithTheGlobalBatch) {
  const auto backends = m::available_backends();
  if (std::find(backends.begin(), backends.end(), "onednn") == backends.end())
    GTEST_SKIP() << "built without oneDNN";
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "oneDNN's OpenMP runtime is not instrumented for ThreadSanitizer";
#endif
  const m::Graph g = small_cnn();
  const m::TrainOptions o = data_parallel_options(1 << 10);
  const auto one = train_single(g, "onednn", 2 * 3, 4, o);
  const auto many = train_ranks(g, "onednn", 2, 3, 4, o);
  const auto ref = train_single(g, "reference", 2 * 3, 4, o);
  EXPECT_LT(max_rel_diff(one, many), 1e-5);
  EXPECT_LT(max_rel_diff(one, ref), 1e-4) << "oneDNN and the reference backend trained apart";
}

INSTANTIATE_TEST_SUITE_P(FusionOnAndOff, DataParallel,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values(size_t(0), size_t(1) << 10, size_t(25) << 20)));

namespace {
// Records the buckets it is asked to reduce (and does nothing else: one rank's "average"); the
// test thread can wait for the first call.
class RecordingReducer : public m::GradientReducer {
 public:
  void allreduce_avg(size_t offset, size_t) override {
    std::lock_guard lk(mu_);
    offsets_.push_back(offset);
    called_.notify_all();
  }
  std::string describe() const override { return "recording"; }
  bool wait_for_a_call(std::chrono::seconds limit) {
    std::unique_lock lk(mu_);
    return called_.wait_for(lk, limit, [&] { return !offsets_.empty(); });
  }
  std::vector<size_t> offsets() {
    std::lock_guard lk(mu_);
    return offsets_;
  }

 private:
  std::mutex mu_;
  std::condition_variable called_;
  std::vector<size_t> offsets_;
};

// Runs one step with a RecordingReducer; in the trace of the last backward layer (node 1)
// says whether the reducer had been (or, waiting up to 10 s, got) called by then. Ordering,
// not timing: with overlap the first bucket is handed over before that layer, so the
// communication thread gets to it however slow the machine is; without overlap nothing is
// handed over before backward returns, so the reducer cannot have been called.
struct OverlapProbe {
  bool reduced_during_backward = false;
  std::vector<size_t> offsets;
};
OverlapProbe probe_overlap(m::Network& net, m::TrainOptions o) {
  RecordingReducer* reducer = nullptr;
  m::Trainer t(net, o, [&](float*, size_t) {
    auto r = std::make_unique<RecordingReducer>();
    reducer = r.get();
    return r;
  });
  OverlapProbe p;
  net.set_trace([&](int node, m::Phase ph, auto, auto) {
    if (ph != m::Phase::backward || node != 1) return;
    p.reduced_during_backward =
        o.overlap ? reducer->wait_for_a_call(std::chrono::seconds(10)) : !reducer->offsets().empty();
  });
  auto src = m::make_synthetic_source(net.graph().input_dims(), 10, 4, 1, 0);
  t.step(*src, false);  // untraced: the trainer keeps the trace set here
  net.set_trace({});
  p.offsets = reducer->offsets();
  return p;
}
}  // namespace

// Buckets are reduced in plan order, the first one while backward still runs.
TEST(Trainer, AllreduceStartsDuringBackward) {
  const m::Graph g = m::build_model("lenet");
  auto net = m::make_network("reference", g, 4);
  m::TrainOptions o;
  o.world = 2;  // pretend: the reducer stands in for the other rank
  o.fusion_bytes = 0;
  const OverlapProbe p = probe_overlap(*net, o);
  const m::BucketPlan plan = m::plan_buckets(g, o.first_bucket_bytes, o.fusion_bytes);
  ASSERT_GE(plan.buckets.size(), 2u);
  ASSERT_EQ(p.offsets.size(), plan.buckets.size());
  for (size_t i = 0; i < p.offsets.size(); ++i) EXPECT_EQ(p.offsets[i], plan.buckets[i].offset);
  EXPECT_TRUE(p.reduced_during_backward) << "the first bucket's allreduce must start before backward ends";
  // --no-overlap: nothing starts before backward is done.
  o.overlap = false;
  const OverlapProbe q = probe_overlap(*net, o);
  EXPECT_EQ(q.offsets.size(), plan.buckets.size());
  EXPECT_FALSE(q.reduced_during_backward) << "--no-overlap reduced a bucket during backward";
}

// A failing allreduce surfaces in the step, not as a hang.
TEST(Trainer, ReducerFailureIsAnErrorOfTheStep) {
  class Failing : public m::GradientReducer {
   public:
    void allreduce_avg(size_t, size_t) override { throw std::runtime_error("peer 1 is gone"); }
    std::string describe() const override { return "failing"; }
  };
  const m::Graph g = small_cnn();
  auto net = m::make_network("reference", g, 2);
  m::TrainOptions o;
  o.world = 2;
  o.timeout = std::chrono::milliseconds(5000);
  m::Trainer t(*net, o, [](float*, size_t) { return std::make_unique<Failing>(); });
  auto src = m::make_synthetic_source(g.input_dims(), 5, 2, 1, 0);
  try {
    t.step(*src);
    FAIL() << "the step should have thrown";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("peer 1 is gone"), std::string::npos) << e.what();
  }
}

using ringbench::DType;
using ringbench::Transport;
using ringbench::bf16_to_float;
using ringbench::dtype_name;
using ringbench::float_to_bf16;
using ringbench::float_to_half;
using ringbench::half_to_float;

// Gradient compression (train --compression, issue 40): each bucket is cast to bf16 or fp16,
// averaged by the ring in that type and cast back. Values unique per (rank, index) whose sums
// the narrow types hold exactly: the result is exactly cast(sum / n), bucket by bucket.
class Compression : public ::testing::TestWithParam<std::tuple<int, DType>> {};

TEST_P(Compression, BucketsAreCastAveragedAndCastBackExactly) {
  const int n = std::get<0>(GetParam());  // not a structured binding: a lambda uses it (clang 14)
  const DType wire = std::get<1>(GetParam());
  const size_t count = 1000;
  // (rank * 16 + i % 16) * 2^(i / 16 % 8 - 4): unique for i < 128 and every rank; a sum over
  // ranks is below 256 times one power of two, which 8 significant bits hold.
  const auto value = [](int rank, size_t i) {
    return std::ldexp(float(rank * 16 + int(i % 16)), int(i / 16 % 8) - 4);
  };
  const auto narrow = wire == DType::bf16 ? float_to_bf16 : float_to_half;
  const auto widen = wire == DType::bf16 ? bf16_to_float : half_to_float;
  std::vector<std::vector<float>> out(static_cast<size_t>(n));
  std::vector<std::string> names(static_cast<size_t>(n));
  run_ranks(n, [&](Transport& t) {
    std::vector<float> grads(count);
    for (size_t i = 0; i < count; ++i) grads[i] = value(t.rank(), i);
    auto r = m::make_ring_reducer(t, grads.data(), count, {}, wire);
    r->allreduce_avg(0, 300);  // two buckets, as the trainer reduces them
    r->allreduce_avg(300, count - 300);
    out[size_t(t.rank())] = grads;
    names[size_t(t.rank())] = r->describe() + " " + dtype_name(r->wire_dtype());
  });
  for (size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int r = 0; r < n; ++r) sum += widen(narrow(value(r, i)));
    const float want = widen(narrow(sum / float(n)));
    for (int r = 0; r < n; ++r) ASSERT_EQ(out[size_t(r)][i], want) << "rank " << r << " element " << i;
  }
  EXPECT_NE(names[0].find(std::string("gradients as ") + dtype_name(wire) + " on the wire"), std::string::npos)
      << names[0];
}

INSTANTIATE_TEST_SUITE_P(RanksAndTypes, Compression,
                         ::testing::Combine(::testing::Values(2, 4), ::testing::Values(DType::bf16, DType::f16)));

// What the narrow type cannot hold is rounded once per hop, never kept in fp32 on the way: a
// third is bf16's nearest, not fp32's.
TEST(CompressionRounding, ValuesCrossTheWireInTheNarrowType) {
  std::vector<float> got;
  run_ranks(2, [&](Transport& t) {
    std::vector<float> grads(64, 1.0f / 3.0f);
    m::make_ring_reducer(t, grads.data(), grads.size(), {}, DType::bf16)->allreduce_avg(0, grads.size());
    if (t.rank() == 0) got = grads;
  });
  ASSERT_EQ(got.size(), 64u);
  EXPECT_EQ(got[0], bf16_to_float(float_to_bf16(1.0f / 3.0f)));
  EXPECT_NE(got[0], 1.0f / 3.0f);
}
