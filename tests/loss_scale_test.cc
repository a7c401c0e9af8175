// Dynamic loss scaling (models/loss_scaler.h): GradScaler's rules, a forced overflow through the
// real trainer (skipped step, lowered scale, recovery), and the same decision on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "models/loss_scaler.h"
#include "train_helpers.h"

namespace ringbench::testing {
namespace {
namespace m = models;

TEST(LossScaleOption, ParsesNoneDynamicAndPowersOfTwo) {
  EXPECT_FALSE(m::parse_loss_scale("none")->enabled);
  EXPECT_TRUE(m::parse_loss_scale("dynamic")->enabled);
  EXPECT_EQ(m::parse_loss_scale("dynamic")->initial, 65536);
  EXPECT_EQ(m::parse_loss_scale("dynamic:1024")->initial, 1024);
  EXPECT_EQ(m::parse_loss_scale("dynamic:1")->initial, 1);
  for (const char* bad : {"", "auto", "dynamic:", "dynamic:1000", "dynamic:0", "dynamic:-2", "dynamic:0.5",
                          "dynamic:1e39", "dynamic:nan", "dynamic:inf", "dynamic:2x", "static:4"})
    EXPECT_FALSE(m::parse_loss_scale(bad)) << bad;
}

TEST(LossScaler, HalvesOnOverflowAndDoublesAfterTheIntervalOfGoodSteps) {
  m::LossScaler s({.enabled = true, .initial = 1024, .interval = 3});
  s.update(false);
  EXPECT_EQ(s.scale(), 512);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 512) << "two good steps of three";
  s.update(false);  // an overflow restarts the count
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 256);
  s.update(true);
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.counts().skipped, 2);
  EXPECT_EQ(s.counts().raised, 1);
  EXPECT_EQ(s.counts().lowest, 256);
  m::LossScaler off({});
  off.update(false);
  EXPECT_EQ(off.scale(), 1);
  EXPECT_EQ(off.counts().skipped, 0);
}

// A power-of-two scale commutes exactly with every multiply and add of forward and backward,
// so without an overflow a scaled step is the unscaled step bit for bit.
TEST(LossScaling, WithoutOverflowTrainsBitForBitAsUnscaled) {
  const m::Graph g = small_cnn();
  m::TrainOptions o = data_parallel_options(1 << 10);
  const auto plain = train_single(g, "reference", 4, 5, o);
  o.loss_scale = {.enabled = true, .initial = 65536, .interval = 2};  // it also doubles twice
  const auto scaled = train_single(g, "reference", 4, 5, o);
  EXPECT_EQ(plain, scaled);
}

// A scale of 2^127 overflows the gradients within a few steps: each overflowing step is
// skipped, leaving the parameters as they were and halving the scale; the others move the
// weights. The run ends once training has recovered: three good steps in a row after a skip.
TEST(LossScaling, AForcedOverflowIsSkippedLowersTheScaleAndRecovers) {
  const m::Graph g = small_cnn();
  m::TrainOptions o = data_parallel_options(1 << 10);
  o.loss_scale = {.enabled = true, .initial = 0x1p127, .interval = 1000};
  auto net = m::make_network("reference", g, 4);
  m::Trainer t(*net, o, nullptr);
  SliceSource src(g.input_dims(), g.output_node().out.c, 4, 0);
  std::vector<float> before = t.host_params();
  int skipped = 0, good_after_skip = 0;
  double scale = 0x1p127;
  for (int s = 0; s < 300 && !(skipped > 0 && good_after_skip >= 3); ++s) {
    const m::StepRecord r = t.step(src);
    EXPECT_EQ(r.loss_scale, scale) << "step " << s;
    const std::vector<float> after = t.host_params();
    if (r.skipped) {
      EXPECT_EQ(after, before) << "a skipped step changed the parameters, step " << s;
      ++skipped;
      good_after_skip = 0;
      scale /= 2;
    } else {
      EXPECT_NE(after, before) << "a step taken left the parameters as they were, step " << s;
      good_after_skip += skipped > 0;
    }
    EXPECT_TRUE(std::isfinite(r.loss));
    before = after;
  }
  EXPECT_GE(skipped, 1) << "2^127 never overflowed: the test forces nothing";
  EXPECT_GE(good_after_skip, 3) << "never recovered within 300 steps";
  EXPECT_EQ(t.loss_scaler().counts().skipped, skipped);
  EXPECT_EQ(t.loss_scaler().scale(), scale);
  EXPECT_LT(scale, 0x1p127);
  for (float v : t.host_params()) ASSERT_TRUE(std::isfinite(v));
  for (float v : t.host_momentum()) ASSERT_TRUE(std::isfinite(v));
}

// Puts an inf into this rank's own gradients on its first allreduce, then averages as usual.
class PoisoningReducer : public m::GradientReducer {
 public:
  PoisoningReducer(std::unique_ptr<m::GradientReducer> inner, float* grads, bool poison)
      : inner_(std::move(inner)), grads_(grads), poison_(poison) {}
  void allreduce_avg(size_t offset, size_t count) override {
    if (poison_ && count > 0) {
      grads_[offset] = std::numeric_limits<float>::infinity();
      poison_ = false;
    }
    inner_->allreduce_avg(offset, count);
  }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::unique_ptr<m::GradientReducer> inner_;
  float* grads_;
  bool poison_;
};

// Only rank 1's gradients overflow; rank 0's are finite. Both must skip that step (the averaged
// gradients carry the inf) and stay bit-identical after.
TEST(LossScaling, AnOverflowOnOneRankSkipsTheStepOnEveryRank) {
  const m::Graph g = small_cnn();
  m::TrainOptions o = data_parallel_options(1 << 10);
  o.loss_scale = {.enabled = true, .initial = 1024, .interval = 1000};
  const int n = 3;
  std::vector<std::vector<bool>> skips(n);
  std::vector<std::vector<float>> params(n);
  std::vector<double> scales(n);
  run_ranks(n, [&](Transport& tr) {
    const int rank = tr.rank();
    auto net = m::make_network("reference", g, 2);
    m::TrainOptions ro = o;
    ro.rank = rank;
    ro.world = n;
    m::Trainer t(*net, ro, [&](float* grads, size_t count) {
      return std::make_unique<PoisoningReducer>(ring_reducer(tr, grads, count), grads, rank == 1);
    });
    SliceSource src(g.input_dims(), g.output_node().out.c, 2, rank);
    for (int s = 0; s < 4; ++s) skips[size_t(rank)].push_back(t.step(src).skipped);
    params[size_t(rank)] = t.host_params();
    scales[size_t(rank)] = t.loss_scaler().scale();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(skips[size_t(r)], (std::vector<bool>{true, false, false, false})) << "rank " << r;
    EXPECT_EQ(scales[size_t(r)], 512) << "rank " << r;
    EXPECT_EQ(params[size_t(r)], params[0]) << "rank " << r << " diverged from rank 0";
  }
}

}  // namespace
}  // namespace ringbench::testing
