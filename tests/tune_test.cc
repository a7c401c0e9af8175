// `ringbench tune`'s model on synthetic timelines and cost models with a known optimum: rebucketing
// follows train's bucket planner, and the ranking finds the setting the cost model makes best.
#include <gtest/gtest.h>

#include <algorithm>

#include "runner/sweep/sweep_config.h"
#include "runner/tune/autotune.h"
#include "runner/tune/tune_model.h"

namespace ringbench::tune {
namespace {

using predict::StepTimeline;

constexpr double MiB = 1 << 20;

std::string knob(const Ranked& r, const char* key) { return r.axes[axis_index(key)]; }

// The grid: fusion_mb {1, 4, 16, 64} x first_bucket_mb {0.25, 1, 4} x compression
// {none, fp16} x segment {256K, 1M, 4M}.
AxisLists grid() {
  return parse_sweep_config("name: t\nnodes: [2]\ncluster: {type: local}\ntrain: {models: [lenet], "
                            "fusion_mb: [1, 4, 16, 64], first_bucket_mb: [0.25, 1, 4], compression: [none, fp16], "
                            "segment: [256K, 1M, 4M]}\n", "t.yaml")
      .train.axes;
}

// Ten 1 MiB tensors released 1 ms apart from 11 ms; backward ends at 20 ms; no optimizer time.
StepTimeline ten_tensors() {
  StepTimeline t{20e-3, 0, {}};
  for (int i = 0; i < 10; ++i) t.buckets.push_back({MiB, 10e-3 + 1e-3 * (i + 1)});
  return t;
}

predict::CostFit fit(double alpha_s, double beta_s) {
  predict::CostFit f;
  f.algo = "ring";
  f.alpha_s = alpha_s;
  f.beta_s = beta_s;
  return f;
}

// models/bucket_plan.cc's rule: the first bucket closes at first_bytes, the others at
// fusion_bytes, 0 fuses nothing; a bucket is ready with its last tensor.
TEST(Tune, TheAllreduceProbeStopsAtTheFirstSizeThatHoldsTheLargestGradient) {
  auto timeline = [](std::vector<double> bytes) {
    predict::StepTimeline t;
    for (double b : bytes) t.buckets.push_back({b, 0});
    return t;
  };
  EXPECT_EQ(tune::probe_max_bytes({}), "64M");                                  // nothing known
  EXPECT_EQ(tune::probe_max_bytes({timeline({4096, 8192})}), "1M");             // at least 1M
  EXPECT_EQ(tune::probe_max_bytes({timeline({4e6, 2.65e6})}), "16M");           // LeNet: 6.65 MB
  EXPECT_EQ(tune::probe_max_bytes({timeline({4e6}), timeline({17e6})}), "64M");  // the largest model
  EXPECT_EQ(tune::probe_max_bytes({timeline({double(16 << 20)})}), "16M");     // exactly 16M fits
  EXPECT_EQ(tune::probe_max_bytes({timeline({95e6})}), "64M");                  // at most 64M
}

TEST(Tune, RebucketFollowsTheBucketPlanner) {
  const auto tensors = ten_tensors().buckets;
  EXPECT_EQ(rebucket(tensors, MiB, 0).size(), 10u);
  const auto b = rebucket(tensors, 2 * MiB, 4 * MiB);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].bytes, 2 * MiB);
  EXPECT_DOUBLE_EQ(b[0].ready_s, 12e-3);
  EXPECT_EQ(b[1].bytes, 4 * MiB);
  EXPECT_DOUBLE_EQ(b[1].ready_s, 16e-3);
  EXPECT_DOUBLE_EQ(b[2].ready_s, 20e-3);
  const auto open = rebucket(tensors, MiB, 3 * MiB);  // 1 + 3 + 3 + 3: the last one full too
  ASSERT_EQ(open.size(), 4u);
  const auto rest = rebucket(tensors, MiB, 4 * MiB);  // 1 + 4 + 4 + an open 1
  ASSERT_EQ(rest.size(), 4u);
  EXPECT_EQ(rest.back().bytes, MiB);
}

// Bandwidth alone (α = 0): halving the bytes wins, and small buckets overlap most: fp16, 1 MiB
// buckets; the segment does not matter, so it stays at the default, as does the first bucket
// (one tensor either way).
TEST(Tune, BandwidthBoundPicksFp16AndSmallBuckets) {
  const auto ranked = rank_settings(ten_tensors(), grid(), ring_cost(fit(0, 1e-9), 2));
  ASSERT_EQ(ranked.size(), 4u * 3 * 2 * 3 + 1);  // the grid and train's defaults
  EXPECT_EQ(knob(ranked.front(), "compression"), "fp16");
  EXPECT_EQ(knob(ranked.front(), "fusion_mb"), "1");
  EXPECT_EQ(knob(ranked.front(), "first_bucket_mb"), "1");
  EXPECT_EQ(knob(ranked.front(), "segment"), "1M");
  EXPECT_TRUE(std::is_sorted(ranked.begin(), ranked.end(),
                             [](const Ranked& a, const Ranked& b) { return a.step_s < b.step_s; }));
  EXPECT_EQ(std::count_if(ranked.begin(), ranked.end(), [](const Ranked& r) { return r.is_default; }), 1);
}

// Latency alone (β = 0, α = 1 ms a message, 2 messages an allreduce at N = 2): the last bucket
// cannot start before backward ends at 20 ms, so 22 ms is the best step, which train's defaults
// (buckets of 1 and 9 MiB) reach: nothing beats them and they rank first (ties: fewer changes).
// The worst, in 256K segments of fp32: a first bucket of 4 MiB (8 pieces each way: 2 + 6 extra
// messages of 2 ms, ready at 14 ms, done at 28) then six 1 MiB buckets (2 pieces: 4 ms each): 52 ms.
TEST(Tune, LatencyBoundKeepsTheDefaultsWhenNothingBeatsThem) {
  const auto ranked = rank_settings(ten_tensors(), grid(), ring_cost(fit(1e-3, 0), 2));
  EXPECT_TRUE(ranked.front().is_default);
  EXPECT_NEAR(ranked.front().step_s, 22e-3, 1e-12);
  EXPECT_EQ(knob(ranked.back(), "fusion_mb"), "1");
  EXPECT_EQ(knob(ranked.back(), "first_bucket_mb"), "4");
  EXPECT_EQ(knob(ranked.back(), "segment"), "256K");
  EXPECT_EQ(knob(ranked.back(), "compression"), "none");
  EXPECT_NEAR(ranked.back().step_s, 52e-3, 1e-12);
}

// train --autotune's search on a fake job: the probe sees ten 1 MiB tensors and a ring of
// β = 1 ns/B, α = 0 (the bandwidth-bound case above); the samples' times are a table in which the
// second-best predicted setting is fastest. The search measures the top 2 and the defaults
// alternately, picks the best measured (not the best predicted), and leaves the job on it.
TEST(Tune, AutotunePicksTheBestMeasuredOfTheTopKAndTheDefaults) {
  const AxisLists space = grid();
  const auto ranked = rank_settings(ten_tensors(), space, ring_cost(fit(0, 1e-9), 2));
  std::vector<std::string> current;
  std::vector<std::vector<std::string>> applied;
  AutotuneJob job;
  job.nodes = 2;
  job.batch = 8;
  job.gradient_bytes = 10 * MiB;
  job.apply = [&](const std::vector<std::string>& axes) { current = axes, applied.push_back(axes); };
  job.bucket_bytes = [&] { return std::vector<double>(10, MiB); };
  job.step = [&] {
    models::StepRecord r;
    r.forward_s = 10e-3, r.backward_s = 10e-3;
    for (int i = 0; i < 10; ++i) r.bucket_ready_s.push_back(1e-3 * (i + 1));
    return r;
  };
  job.allreduce_s = [](size_t bytes) { return double(bytes) * 1e-9; };
  job.share = [&](const std::string& key, const nlohmann::json& mine) {
    if (key.rfind("sample/", 0) != 0) return std::vector<nlohmann::json>{mine, mine};
    const double secs = current == ranked[1].axes ? 0.1 : 0.2;  // the slower rank's time counts
    return std::vector<nlohmann::json>{secs, secs * 0.9};
  };
  job.say = [](const std::string&) {};
  AutotuneOptions o;
  o.top_k = 2, o.repeats = 2, o.steps = 4;
  const AutotuneResult r = autotune(job, o, space, axis_defaults());
  EXPECT_NEAR(r.fit.beta_s, 1e-9, 1e-12);
  EXPECT_EQ(r.ranked, ranked.size());
  ASSERT_EQ(r.samples.size(), 6u);  // (2 + the defaults) x 2, repeats outermost
  for (size_t i = 0; i < r.samples.size(); ++i) {
    EXPECT_EQ(r.samples[i].repeat, int(i / 3));
    EXPECT_EQ(r.samples[i].axes, i % 3 < 2 ? ranked[i % 3].axes : r.defaults);
  }
  EXPECT_TRUE(r.samples[2].is_default);
  EXPECT_EQ(r.chosen, ranked[1].axes);
  EXPECT_EQ(applied.back(), ranked[1].axes);
  EXPECT_EQ(applied.front()[axis_index("fusion_mb")], "0");  // the probe: nothing fused
  EXPECT_DOUBLE_EQ(r.median_img_s(r.chosen), 2 * 8 * 4 / 0.1);
  EXPECT_DOUBLE_EQ(r.to_json()["speedup_over_defaults"].get<double>(), 2.0);
  EXPECT_EQ(r.steps, (1 + 4) + 6 * (1 + 4));
  const std::string csv = r.csv();
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "trial,repeat,compression,fusion_mb,first_bucket_mb,segment,default,predicted_img_s,measured_img_s,seconds,chosen");
}

}  // namespace
}  // namespace ringbench::tune
