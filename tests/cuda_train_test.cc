// Training on the GPU (label gpu): the trainer's device path (buffers in device memory, the SGD
// kernel, the events between the compute stream and the communication thread), our ring on
// device gradients staged through pinned host memory, and the data-parallel contract with GPU
// buffers. Every test skips, with the reason, where there is no usable CUDA device.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/staged_allreduce.h"
#include "collectives/verify.h"
#include "cuda/device.h"
#include "cuda/memory.h"
#include "models/cuda/gpu_reducers.h"
#include "models/network.h"
#include "models/sgd.h"
#include "models/train_buffers.h"
#include "models/trainer.h"
#include "models/zoo.h"
#include "rank_threads.h"
#include "train_helpers.h"

namespace m = ringbench::models;
namespace cu = ringbench::cuda;
using ringbench::DType;
using ringbench::ReduceOp;
using ringbench::Transport;

namespace {

// cudaMemcpy from pageable memory may return before the copy has reached the device, and the
// code under test runs on non-blocking streams, which do not wait for the legacy default
// stream: wait for it.
void to_device(void* dst, const void* src, size_t bytes) {
  ASSERT_EQ(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(0), cudaSuccess);
}

using namespace ringbench::testing;  // train_helpers.h, rank_threads.h

// Stands in for a GPU backend where only the trainer's buffers matter: it computes nothing.
class NoComputeDeviceNetwork : public m::Network {
 public:
  NoComputeDeviceNetwork(const m::Graph& g, cudaStream_t s) : g_(g), s_(s) {}
  const m::Graph& graph() const override { return g_; }
  int batch() const override { return 1; }
  std::string backend() const override { return "none (test)"; }
  std::string describe() const override { return ""; }
  void bind(float*, float*, float*) override {}
  void set_input(const float*) override {}
  void forward(const m::ForwardArgs&) override {}
  void get_output(size_t, float*) override {}
  void set_output_grad(size_t, const float*) override {}
  void backward(const std::function<void(int)>&) override {}
  void get_input_grad(float*) override {}
  bool on_device() const override { return true; }
  void* stream() const override { return s_; }

 private:
  const m::Graph& g_;
  cudaStream_t s_;
};

}  // namespace

// The SGD kernel does sgd.cc's arithmetic bit for bit, with weight decay on the decayed tensors
// only, bucket by bucket (each bucket's tensors found by the kernel's table).
TEST(CudaTrainer, SgdKernelMatchesTheCpuUpdateExactly) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const m::Graph g = small_cnn();
  const m::BucketPlan plan = m::plan_buckets(g, 256, 1024);  // several buckets, mixed tensors
  ASSERT_GE(plan.buckets.size(), 3u);
  const m::SgdOptions sgd{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f};
  cu::Stream stream;
  NoComputeDeviceNetwork net(g, stream.get());
  auto buffers = m::make_train_buffers(net, plan, sgd, 42);
  ASSERT_TRUE(buffers->on_device());
  std::vector<float> w = buffers->to_host(m::TrainBuffers::Which::params), v(w.size(), 0.0f), grad(w.size());
  std::vector<float> w0(w.size()), s0(g.state_count);
  m::init_params(g, 42, w0.data(), s0.data());
  ASSERT_EQ(w, w0) << "the device starts from init_params";
  for (int round = 0; round < 3; ++round) {  // the second and third rounds use the momentum
    for (size_t i = 0; i < grad.size(); ++i) grad[i] = float(std::sin(0.7 * double(i) + round)) * 0.1f;
    to_device(buffers->grads(), grad.data(), grad.size() * 4);
    for (size_t b = 0; b < plan.buckets.size(); ++b) {
      buffers->update(b, false);
      m::sgd_update(g, plan.buckets[b].first, plan.buckets[b].last, sgd, w.data(), grad.data(), v.data());
    }
    const std::vector<float> got = buffers->to_host(m::TrainBuffers::Which::params);
    ASSERT_EQ(got.size(), w.size());
    size_t differ = 0;
    for (size_t i = 0; i < w.size(); ++i) differ += std::memcmp(&got[i], &w[i], 4) != 0;
    EXPECT_EQ(differ, 0u) << "round " << round << ": elements that differ from sgd_update";
  }
}

// A few steps of each model on cudnn follow the reference backend's (train_helpers.h).
class CudnnTracksReference : public ::testing::TestWithParam<TracksReferenceCase> {};

TEST_P(CudnnTracksReference, LossTrajectory) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  expect_tracks_reference("cudnn", GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, CudnnTracksReference,
    ::testing::Values(TracksReferenceCase{"lenet", {}, 4, 5, 0.01f},
                      TracksReferenceCase{"mobilenet_v1", {.classes = 10, .image_size = 64}, 4, 1, 0.01f}),
    [](const ::testing::TestParamInfo<TracksReferenceCase>& p) { return std::string(p.param.model); });

// bf16 and fp16 on cudnn (convolutions and fc layers on 2-byte copies, the rest fp32) track
// fp32 on cudnn from the same seed: 20 SGD steps on one batch, with precision_test.cc's
// Bf16Training tolerances (why they are what they are is said there): the first step's loss
// within 1% of fp32's plus 5 times what fp32 on inputs perturbed by 2^-9 (bf16's half ulp)
// differs; the mean |difference| over the steps within twice the perturbed run's plus 2% of the
// first loss; and the loss at least halves. fp16 trains with dynamic loss scaling, as train
// does by default, from 2^10 (a power of two: exact), and must skip no step here (20 steps
// never reach the 2000 between raises; a skip would shift the whole trajectory).
struct HalfTrackCase {
  const char* model;
  int image_size, batch, steps;
  float lr;
};

class CudnnHalfTraining : public ::testing::TestWithParam<HalfTrackCase> {};

TEST_P(CudnnHalfTraining, LossTracksFp32) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const HalfTrackCase c = GetParam();
  const std::string model = c.model;
  const m::Graph g = model == "lenet" ? m::build_model(model)
                                      : m::build_model(model, {.classes = 10, .image_size = c.image_size});
  const auto fp32 = losses_on_one_batch("cudnn", g, c.batch, c.steps, c.lr, m::Precision::fp32);
  const auto nudged = losses_on_one_batch("cudnn", g, c.batch, c.steps, c.lr, m::Precision::fp32, 1.0f / 512);
  const double first_fp32_diff = std::fabs(nudged[0] - fp32[0]), fp32_diff = mean_abs_diff(nudged, fp32);
  const int cc_major = ringbench::cuda::gpu_info(0, false).cc_major;
  for (const m::Precision p : {m::Precision::bf16, m::Precision::fp16}) {
    const char* name = m::precision_name(p);
    if (cc_major < (p == m::Precision::bf16 ? 8 : 7)) {
      std::printf("not checked: %s needs tensor cores this GPU lacks\n", name);
      continue;
    }
    const m::LossScaleOptions scaling{.enabled = p == m::Precision::fp16, .initial = 1024, .interval = 2000};
    int skipped = 0;
    const auto got = losses_on_one_batch("cudnn", g, c.batch, c.steps, c.lr, p, 0, scaling, &skipped);
    for (double l : got) ASSERT_TRUE(std::isfinite(l)) << name;
    EXPECT_EQ(skipped, 0) << name << ": steps loss scaling skipped";
    const double first_diff = std::fabs(got[0] - fp32[0]);
    EXPECT_LE(first_diff, 1e-2 * fp32[0] + 5 * first_fp32_diff) << c.model << " " << name << ": the first step's loss";
    const double diff = mean_abs_diff(got, fp32);
    EXPECT_LE(diff, 2 * fp32_diff + 2e-2 * fp32[0])
        << c.model << " " << name << ": mean |loss difference| over " << c.steps << " steps, " << diff
        << ", fp32 with its input perturbed by 2^-9 " << fp32_diff;
    EXPECT_LT(got.back(), 0.5 * got.front()) << c.model << " " << name << ": training lowers the loss";
    std::printf("%s %s: first loss %.4g, |%s - fp32| %.3g, perturbed fp32 %.3g; mean |loss - fp32's| over %d steps: "
                "%s %.3g, fp32 with inputs perturbed by 2^-9 %.3g\n",
                c.model, name, fp32[0], name, first_diff, first_fp32_diff, c.steps, name, diff, fp32_diff);
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, CudnnHalfTraining,
                         ::testing::Values(HalfTrackCase{"lenet", 28, 8, 20, 0.005f},
                                           HalfTrackCase{"mobilenet_v1", 64, 8, 20, 0.01f}),
                         [](const ::testing::TestParamInfo<HalfTrackCase>& p) { return std::string(p.param.model); });

// evaluate() on the GPU: the same sample count, and losses close to the reference backend's.
TEST(CudaTrainer, EvaluateMatchesReference) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const m::Graph g = m::build_model("lenet", {});
  m::Dataset d;
  d.dims = g.input_dims();
  d.classes = 10;
  const int n = 10;  // batch 4: two full batches and a padded one
  d.images.resize(size_t(n) * size_t(d.dims.numel()));
  for (size_t i = 0; i < d.images.size(); ++i) d.images[i] = float(std::sin(0.11 * double(i)));
  for (int i = 0; i < n; ++i) d.labels.push_back(i % 10);
  m::Trainer::Eval e[2];
  const char* backends[2] = {"reference", "cudnn"};
  for (int k = 0; k < 2; ++k) {
    auto net = m::make_network(backends[k], g, 4);
    m::Trainer t(*net, {}, nullptr);
    SliceSource src(g.input_dims(), 10, 4, 0);
    t.step(src);
    e[k] = t.evaluate(d);
  }
  EXPECT_EQ(e[1].total, n);
  EXPECT_NEAR(e[1].loss_sum, e[0].loss_sum, 0.02 * std::fabs(e[0].loss_sum) + 1e-3);
}

// A host reducer cannot take GPU gradients: the trainer says so at setup.
TEST(CudaTrainer, HostReducerWithGpuGradientsIsAClearError) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  class HostOnly : public m::GradientReducer {
   public:
    void allreduce_avg(size_t, size_t) override {}
    std::string describe() const override { return "host only"; }
  };
  const m::Graph g = small_cnn();
  auto net = m::make_network("cudnn", g, 2);
  m::TrainOptions o;
  o.world = 2;
  try {
    m::Trainer t(*net, o, [](float*, size_t) { return std::make_unique<HostOnly>(); });
    FAIL() << "a host reducer was accepted for GPU gradients";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("GPU"), std::string::npos) << e.what();
  }
}

// Dynamic loss scaling with GPU buffers (DeviceBuffers::unscale_if_finite's kernels): without
// an overflow a scaled run trains as the unscaled one (a power-of-two scale is exact; within
// 1e-5, since cuDNN's algorithms may sum in another order run to run); 2^127 overflows within a
// few steps, and each such step is skipped (the parameters as they were, the scale halved).
TEST(CudaTrainer, LossScalingSkipsOverflowsAndOtherwiseTrainsAsUnscaled) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const m::Graph g = small_cnn();
  m::TrainOptions o = data_parallel_options(1 << 10);
  const auto plain = train_single(g, "cudnn", 4, 5, o);
  o.loss_scale = {.enabled = true, .initial = 65536, .interval = 2};
  const auto scaled = train_single(g, "cudnn", 4, 5, o);
  ASSERT_EQ(plain.size(), scaled.size());
  for (size_t i = 0; i < plain.size(); ++i) ASSERT_NEAR(scaled[i], plain[i], 1e-5 * (1 + std::fabs(plain[i]))) << i;

  o.loss_scale = {.enabled = true, .initial = 0x1p127, .interval = 1000};
  auto net = m::make_network("cudnn", g, 4);
  m::Trainer t(*net, o, nullptr);
  SliceSource src(g.input_dims(), g.output_node().out.c, 4, 0);
  std::vector<float> before = t.host_params();
  int skipped = 0;
  for (int s = 0; s < 50 && skipped == 0; ++s) {
    const m::StepRecord r = t.step(src);
    const std::vector<float> after = t.host_params();
    if (r.skipped) {
      ++skipped;
      EXPECT_EQ(after, before) << "a skipped step changed the parameters, step " << s;
    }
    before = after;
  }
  EXPECT_EQ(skipped, 1) << "2^127 never overflowed in 50 steps: the test forces nothing";
  EXPECT_EQ(t.loss_scaler().scale(), 0x1p126);
}

// The staged ring on device buffers: exactly the expected sums (values unique per rank and
// index, every partial sum an exact integer: collectives/verify.h), for empty, tiny, odd and
// multi-piece counts, whole-bucket and pipelined pieces, at an offset, twice in a row (the
// second run reads what the first copied back, without a sync in between).
TEST(StagedAllreduce, DeviceBuffersExactSums) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  for (int n : {2, 3}) {
    for (size_t piece : {size_t(0), size_t(64) << 10, size_t(1) << 20}) {
      ringbench::testing::run_ranks(n, [&](Transport& t) {
        const size_t max_count = (size_t(3) << 20) / 4 + 13;
        cu::DeviceArray<float> dev(max_count, "test");
        ringbench::AllreduceOptions ao;
        ao.ring.segment_bytes = 256 << 10;
        ringbench::StagedAllreduce ar(t, dev.data(), max_count, DType::f32, ReduceOp::sum, ao,
                                      {.piece_bytes = piece});
        std::vector<float> host(max_count), back(max_count);
        for (size_t count : {size_t(0), size_t(1), size_t(1000), size_t(300001), max_count - 7}) {
          const size_t offset = std::min<size_t>(7, max_count - count);
          ringbench::fill_input(DType::f32, host.data() + offset, count, t.rank(), n);
          to_device(dev.data(), host.data(), max_count * 4);
          ar.run(count, offset);
          ar.sync();
          ASSERT_EQ(cudaMemcpy(back.data(), dev.data(), max_count * 4, cudaMemcpyDeviceToHost), cudaSuccess);
          EXPECT_EQ(ringbench::count_wrong(DType::f32, back.data() + offset, count, n, ReduceOp::sum), 0u)
              << n << " ranks, piece " << piece << ", count " << count;
          // Outside the range: untouched.
          EXPECT_TRUE(std::equal(back.begin(), back.begin() + long(offset), host.begin()));
          EXPECT_TRUE(std::equal(back.begin() + long(offset + count), back.end(), host.begin() + long(offset + count)));
        }
        // Twice in a row on the same range: sum of sums (n * the expected value, still exact).
        const size_t count = 200003;
        ringbench::fill_input(DType::f32, host.data(), count, t.rank(), n);
        to_device(dev.data(), host.data(), count * 4);
        ar.run(count, 0);
        ar.run(count, 0);
        ar.sync();
        ASSERT_EQ(cudaMemcpy(back.data(), dev.data(), count * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i)
          wrong += back[i] != float(n) * ringbench::expected_value(DType::f32, i, n, ReduceOp::sum);
        EXPECT_EQ(wrong, 0u) << "two runs in a row, " << n << " ranks, piece " << piece;
        const size_t per = piece / 4;
        EXPECT_EQ(ar.pieces(count), !per || count <= per ? size_t(1) : (count + per - 1) / per);
      });
    }
  }
}

// The staged reducer (the trainer's view): averages, exact where verify.h makes them exact, with
// the result ordered on its stream.
TEST(StagedAllreduce, GradientReducerAverages) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const int n = 2;
  ringbench::testing::run_ranks(n, [&](Transport& t) {
    const size_t count = 1 << 20;
    cu::DeviceArray<float> dev(count, "test");
    auto r = m::make_staged_reducer(dev.data(), count, [&](float* pinned, size_t c) {
      return m::make_ring_reducer(t, pinned, c, {});
    }, 128 << 10);
    EXPECT_TRUE(r->on_device());
    ASSERT_NE(r->stream(), nullptr);
    EXPECT_NE(r->describe().find("ring (ours) over tcp"), std::string::npos) << r->describe();
    std::vector<float> host(count), back(count);
    ringbench::fill_input(DType::f32, host.data(), count, t.rank(), n);
    to_device(dev.data(), host.data(), count * 4);
    r->allreduce_avg(1000, count - 5000);  // as a bucket: a range
    ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(r->stream())), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(back.data(), dev.data(), count * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t wrong = 0;
    for (size_t i = 1000; i < count - 4000; ++i) {
      const float want = ringbench::expected_value(DType::f32, i, n, ReduceOp::sum) / float(n);
      wrong += std::memcmp(&back[i], &want, 4) != 0;
    }
    EXPECT_EQ(wrong, 0u);
    EXPECT_EQ(back[999], host[999]);
  });
}

// N ranks x batch b on the GPU, gradients staged through our ring over loopback TCP == one rank
// x batch N*b on the GPU. Tolerance 1e-3 of the largest parameter: cuDNN may pick other
// algorithms at another batch size (some of them accumulate with atomics); the ranks themselves
// must agree bit for bit (they apply the same averaged gradients).
class CudaDataParallel : public ::testing::TestWithParam<std::tuple<size_t, size_t>> {};

TEST_P(CudaDataParallel, SameWeightsAsOneRankWithTheGlobalBatch) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const auto [fusion, piece] = GetParam();
  const m::Graph g = small_cnn();
  const m::TrainOptions o = data_parallel_options(fusion);
  const int n = 2, b = 3, steps = 4;
  const auto one = train_single(g, "cudnn", n * b, steps, o);
  const auto start = train_single(g, "cudnn", n * b, 0, o);
  const auto many = train_ranks(
      g, "cudnn", n, b, steps, o,
      [piece = piece](Transport& t, float* grads, size_t count) {
        return m::make_staged_reducer(grads, count, [&t](float* pinned, size_t c) {
          return m::make_ring_reducer(t, pinned, c, {});
        }, piece);
      },
      [](m::Trainer& tr) { EXPECT_TRUE(tr.on_device()); });
  EXPECT_GT(max_rel_diff(one, start), 1e-2) << "training must have moved the weights";
  EXPECT_LT(max_rel_diff(one, many), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(FusionAndPieces, CudaDataParallel,
                         ::testing::Values(std::tuple{size_t(0), size_t(0)},
                                           std::tuple{size_t(1) << 10, size_t(1) << 10},
                                           std::tuple{size_t(25) << 20, size_t(4) << 20}));
