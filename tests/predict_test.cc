// `ringbench predict`: the α-β fit recovers known costs, the step simulator matches schedules
// computed by hand, and the model check replays a run's points.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/errors.h"
#include "runner/predict/cost_fit.h"
#include "runner/predict/extrapolate.h"
#include "runner/predict/hierarchical.h"
#include "runner/predict/md_model_check.h"
#include "runner/predict/model_check.h"
#include "runner/predict/predictions.h"
#include "runner/predict/step_sim.h"
#include "runner/predict/remote_whatif.h"
#include "runner/record/yaml_reader.h"
#include "runner/predict/whatif.h"
#include "runner/analysis/run.h"

namespace ringbench::predict {
namespace {

using json = nlohmann::json;

// ±`spread` multiplicative noise, the same on every run (a 64-bit LCG).
struct Noise {
  uint64_t s = 12345;
  double spread;
  double operator()() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return 1 + spread * (2 * double(s >> 11) / double(1ULL << 53) - 1);
  }
};

std::vector<CostSample> synthetic(const std::string& algo, double alpha, double beta, std::vector<int> nodes,
                                  double spread) {
  Noise noise{.spread = spread};
  std::vector<CostSample> out;
  for (int n : nodes)
    for (double bytes = 4096; bytes <= 64 << 20; bytes *= 4) {
      const Terms t = terms(algo, n);
      out.push_back({n, bytes, (t.messages * alpha + t.bytes * bytes * beta) * noise()});
    }
  return out;
}

TEST(CostFit, RecoversAlphaAndBetaFromNoisyRingTimes) {
  const double alpha = 25e-6, beta = 1e-9;  // 25 us per message, 1 GB/s
  const CostFit f = fit_cost("ring", synthetic("ring", alpha, beta, {2, 4, 8}, 0.05));
  EXPECT_NEAR(f.alpha_s, alpha, 0.15 * alpha);
  EXPECT_NEAR(f.beta_s, beta, 0.03 * beta);
  EXPECT_GT(f.r2, 0.99);
  EXPECT_LE(f.max_abs_error(), 0.08);  // ±5% noise, fitted on relative error
  EXPECT_EQ(f.residuals.size(), 3u * 8u);
  EXPECT_EQ(f.min_bytes, 4096);
  EXPECT_EQ(f.max_bytes, 64 << 20);
}

TEST(CostFit, ExactWithoutNoiseForEveryAlgorithm) {
  for (const char* algo : {"ring", "direct", "rd"}) {
    SCOPED_TRACE(algo);
    const CostFit f = fit_cost(algo, synthetic(algo, 40e-6, 0.5e-9, {2, 4}, 0));
    EXPECT_NEAR(f.alpha_s / 40e-6, 1, 1e-9);
    EXPECT_NEAR(f.beta_s / 0.5e-9, 1, 1e-9);
    EXPECT_NEAR(f.seconds(16, 1 << 20), terms(algo, 16).messages * 40e-6 + terms(algo, 16).bytes * (1 << 20) * 0.5e-9,
                1e-12);
  }
}

TEST(CostFit, ANegativeTermIsFixedAtZero) {
  // Pure bandwidth, with noise that would pull an unconstrained α below zero.
  std::vector<CostSample> s = synthetic("ring", 0, 2e-9, {2}, 0);
  s[0].seconds *= 0.95;
  const CostFit f = fit_cost("ring", s);
  EXPECT_EQ(f.alpha_s, 0);
  EXPECT_NEAR(f.beta_s, 2e-9, 0.01 * 2e-9);
}

TEST(CostFit, RejectsWhatItCannotFit) {
  EXPECT_THROW(fit_cost("ring", {{2, 4096, 1e-5}}), Error);                      // one size
  EXPECT_THROW(fit_cost("ring", {{2, 4096, 1e-5}, {2, 4096, 2e-5}}), Error);     // one design
  EXPECT_THROW(fit_cost("ring", {{2, 4096, 1e-5}, {2, 8192, 0}}), Error);        // not a time
  EXPECT_THROW(fit_cost("tree", synthetic("ring", 1e-5, 1e-9, {2}, 0)), Error);  // no model
}

double per_byte(double bytes) { return 0.01 * bytes; }

TEST(StepSim, NoBucketsIsComputeThenOptimizer) {
  const StepPrediction p = simulate_step({10, 2, {}}, per_byte);
  EXPECT_DOUBLE_EQ(p.step_s, 12);
  EXPECT_DOUBLE_EQ(p.exposed_s, 0);
  EXPECT_DOUBLE_EQ(p.comm_end_s, 0);
}

TEST(StepSim, OneBucketReducedPastBackward) {
  // Ready at 6, reduced 6..16; backward ends at 10: the optimizer waits 6, then runs 2.
  const StepPrediction p = simulate_step({10, 2, {{1000, 6}}}, per_byte);
  EXPECT_DOUBLE_EQ(p.comm_end_s, 16);
  EXPECT_DOUBLE_EQ(p.exposed_s, 6);
  EXPECT_DOUBLE_EQ(p.step_s, 18);
}

TEST(StepSim, TwoBucketsWithAndWithoutOverlap) {
  const StepTimeline t{10, 4, {{100, 2}, {300, 8}}};  // optimizer: 1 for bucket 0, 3 for bucket 1
  // Overlap: bucket 0 2..3, bucket 1 8..11; updates 10..11 and 11..14.
  const StepPrediction o = simulate_step(t, per_byte);
  EXPECT_DOUBLE_EQ(o.comm_end_s, 11);
  EXPECT_DOUBLE_EQ(o.exposed_s, 0);
  EXPECT_DOUBLE_EQ(o.step_s, 14);
  // No overlap: bucket 0 10..11, bucket 1 11..14; updates 11..12 and 14..17.
  const StepPrediction n = simulate_step(t, per_byte, false);
  EXPECT_DOUBLE_EQ(n.comm_end_s, 14);
  EXPECT_DOUBLE_EQ(n.exposed_s, 3);
  EXPECT_DOUBLE_EQ(n.step_s, 17);
}

TEST(StepSim, ManyBucketsQueueOnOneChannel) {
  // Ten buckets ready at 0, 1, ..., 9, each taking 2: the channel, not backward, sets the pace.
  StepTimeline t{10, 0, {}};
  for (int i = 0; i < 10; ++i) t.buckets.push_back({200, double(i)});
  const StepPrediction o = simulate_step(t, per_byte);
  EXPECT_DOUBLE_EQ(o.comm_end_s, 20);
  EXPECT_DOUBLE_EQ(o.step_s, 20);
  EXPECT_DOUBLE_EQ(o.exposed_s, 10);
  EXPECT_DOUBLE_EQ(simulate_step(t, per_byte, false).step_s, 30);
}

// A run directory with a collectives point (ring at α, β exactly) and lenet at N=1 and N=2 with
// a step timeline.
class TempRun {
 public:
  TempRun() {
    char tmpl[] = "/tmp/predict_test.XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
  }
  ~TempRun() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void add(json rec) {
    rec.update({{"schema", 1}, {"run_id", "t-1"}, {"sweep", "t"}, {"seq", seq_++}, {"repeat", 1},
                {"profile", "none"}, {"status", "ok"}, {"error", ""}, {"started_at", "2026-11-26T00:00:00Z"},
                {"cluster", cluster}});
    std::ofstream(dir_ + "/raw.jsonl", std::ios::app) << rec.dump() << "\n";
  }
  void collectives(double alpha, double beta, const std::string& transport = "tcp",
                   const std::string& algo = "ring", const std::string& op = "allreduce") {
    json rows = json::array();
    for (uint64_t bytes = 65536; bytes <= 16 << 20; bytes *= 4)
      rows.push_back({{"bytes", bytes}, {"count", bytes / 4}, {"dtype", "float"}, {"inplace", false},
                      {"algo", algo}, {"time_us", 1e6 * (2 * alpha + double(bytes) * beta)}, {"algbw_gbps", 1},
                      {"busbw_gbps", 1}, {"p50_us", 1}, {"p99_us", 1}, {"wrong", 0}});
    add({{"point", "collectives/" + (op == "allreduce" ? "" : op + "/") + "n2/" + transport + "/none"},
         {"kind", "collectives"}, {"nodes", 2}, {"transport", transport}, {"collective", op},
         {"collectives", {{"rows", rows}, {"meta", {{"impl", "ring"}, {"collective", op}}}}}});
  }
  // An allreduce point over tcp on `nodes` nodes whose rows took seconds(bytes), flat (the ring)
  // or hierarchical; `chunk`: pipelined in chunks of that many bytes (the record says so, as
  // `allreduce --hier-chunk` writes it), -1: the levels one after the other, saying so (hier_chunk
  // 0), 0: a record from before the pipeline (neither). Every row's busbw is `busbw`.
  void allreduce(int nodes, bool hierarchical, const std::function<double(double bytes)>& seconds, long chunk = 0,
                 double busbw = 1) {
    json rows = json::array();
    for (uint64_t bytes = 65536; bytes <= 16 << 20; bytes *= 4)
      rows.push_back({{"bytes", bytes}, {"count", bytes / 4}, {"dtype", "float"}, {"inplace", false},
                      {"algo", hierarchical ? "hier" : "ring"}, {"time_us", 1e6 * seconds(double(bytes))},
                      {"algbw_gbps", 1}, {"busbw_gbps", busbw}, {"p50_us", 1}, {"p99_us", 1}, {"wrong", 0}});
    json meta = {{"impl", "ring"}, {"collective", "allreduce"}};
    if (chunk) meta["options"] = {{"hier_chunk_bytes", std::max(0L, chunk)}};
    json rec = {{"point", std::string("collectives/") + (hierarchical ? "hier/" : "") + (chunk < 0 ? "chunk0/" : "") +
                              "n" + std::to_string(nodes) + "/tcp/none"},
                {"kind", "collectives"}, {"nodes", nodes}, {"transport", "tcp"}, {"collective", "allreduce"},
                {"hierarchical", hierarchical}, {"collectives", {{"rows", rows}, {"meta", meta}}}};
    if (chunk < 0) rec["hier_chunk"] = "0";
    add(rec);
  }
  void train(int nodes, double step, bool timeline = true, bool hierarchical = false, bool hier_axis = false) {
    auto over_ranks = [](double v) { return json{{"mean_over_ranks", v}, {"max_over_ranks", v}}; };
    json summary = {{"total_img_s", {{"mean", 32 * nodes / step}, {"ci95", 0}}},
                    {"img_s_per_rank", {{"mean", 32 / step}, {"ci95", 0}}},
                    {"step_s", over_ranks(step)}, {"forward_s", over_ranks(0.004)},
                    {"backward_s", over_ranks(0.006)}, {"optimizer_s", over_ranks(0.002)},
                    {"exposed_s", over_ranks(0.001)}};
    if (timeline)
      summary["timeline"] = {{"bucket_bytes", {1 << 20, 1 << 20}}, {"bucket_ready_s", {0.006, 0.009}},
                             {"bucket_allreduce_s", nodes > 1 ? json{0.004, 0.004} : json::array()}};
    const std::string t = nodes > 1 ? "tcp" : "none";
    // hier_axis: the sweep's hierarchical axis set (ids .../hier/...), as a sweep listing it writes.
    json rec = {{"point", "train/lenet/b32/" + std::string(hier_axis ? "hier/" : "") + "n" + std::to_string(nodes) +
                              "/" + t + "/none"},
                {"kind", "train"}, {"nodes", nodes}, {"transport", t}, {"model", "lenet"}, {"batch", 32},
                {"image_size", 0},
                {"train", {{"summary", summary}, {"ranks", json::array()},
                           {"meta", {{"backend", "onednn"}, {"hierarchical", hierarchical}}}}}};
    if (hier_axis) rec["hierarchical"] = true;
    add(rec);
  }
  const std::string& dir() const { return dir_; }
  json cluster = {{"type", "emulated"}, {"link", "1gbit"}};  // every record's

 private:
  std::string dir_;
  int seq_ = 0;
};

TEST(ModelCheck, ReplaysATrainPointWithTheRunsOwnFit) {
  TempRun run;
  run.collectives(50e-6, 2e-9);  // a 1 MiB bucket on 2 ranks: 2·50 us + 2^20 B · 2 ns = 2.197 ms
  run.train(1, 0.012);
  run.train(2, 0.0150);
  const report::Run loaded = report::load_run(run.dir(), 0.1);  // the rows point into it
  const ModelCheck mc = check_model(loaded);
  ASSERT_EQ(mc.fits.size(), 1u);
  EXPECT_NEAR(mc.fits[0].fit.alpha_s / 50e-6, 1, 1e-6);
  ASSERT_EQ(mc.rows.size(), 1u) << "one rank has nothing to predict";
  const CheckRow& r = mc.rows[0];
  EXPECT_EQ(r.point->nodes, 2);
  EXPECT_EQ(r.fit, "tcp N=2");
  // Buckets: 6.000..8.197 ms and 9.000..11.197 ms; updates (1 ms each) at 10..11, 11.197..12.197.
  const double c = 2 * 50e-6 + (1 << 20) * 2e-9;
  EXPECT_NEAR(r.predicted_s, 0.009 + c + 0.001, 1e-12);
  EXPECT_NEAR(r.predicted_exposed_s, 0.009 + c - 0.011, 1e-12);
  EXPECT_NEAR(r.error(), r.predicted_s / 0.015 - 1, 1e-12);
  ASSERT_TRUE(r.in_situ_ratio.has_value());
  EXPECT_NEAR(*r.in_situ_ratio, 0.008 / (2 * c), 1e-9);
  ASSERT_TRUE(r.predicted_from_one_node_s.has_value());  // the same timeline here
  EXPECT_NEAR(*r.predicted_from_one_node_s, r.predicted_s, 1e-12);
  EXPECT_NE(md_model_check(mc).find("## Model check"), std::string::npos);
  // Extrapolated from the one-rank point's timeline (the same here) with the N=2 fit.
  const auto preds = predict_run(loaded, mc.fits, {1, 2, 4});
  ASSERT_EQ(preds.size(), 1u);
  ASSERT_EQ(preds[0].links.size(), 1u);
  const LinkCurve& tcp = preds[0].links[0];
  EXPECT_EQ(tcp.link.name, "tcp");
  EXPECT_NEAR(tcp.curve[1].ring_efficiency, 0.012 / r.predicted_s, 1e-9);
  EXPECT_NEAR(tcp.measured_efficiency.at(2), (64 / 0.015 / 2) / (32 / 0.012), 1e-9);
}

// The alpha-beta fit reads the allreduce points alone: an allgather over the same ring (its own
// algorithm "ring" too) moves half the data, and mixed in it would bend the fit.
TEST(ModelCheck, FitsTheAllreducePointsOnly) {
  TempRun run;
  run.collectives(50e-6, 2e-9);
  run.collectives(10e-6, 0.5e-9, "tcp", "ring", "allgather");
  const report::Run loaded = report::load_run(run.dir(), 0.1);
  const ModelCheck mc = check_model(loaded);
  ASSERT_EQ(mc.fits.size(), 1u);
  EXPECT_NEAR(mc.fits[0].fit.alpha_s / 50e-6, 1, 1e-6);
  EXPECT_NEAR(mc.fits[0].fit.beta_s / 2e-9, 1, 1e-6);
}

TEST(ModelCheck, SaysWhyAPointCannotBeChecked) {
  TempRun old_run;  // recorded before train wrote its timeline: no rows, no report section
  old_run.collectives(50e-6, 2e-9);
  old_run.train(2, 0.015, false);
  const report::Run run = report::load_run(old_run.dir(), 0.1);
  const ModelCheck mc = check_model(run);
  EXPECT_TRUE(mc.rows.empty());
  ASSERT_EQ(mc.unchecked.size(), 1u);
  EXPECT_NE(mc.unchecked[0].find("no step timeline"), std::string::npos) << mc.unchecked[0];
  EXPECT_EQ(md_model_check(mc), "");

  TempRun no_fit;  // only the MPI baseline's allreduce, whose algorithm is MPI's own
  no_fit.collectives(50e-6, 2e-9, "mpi", "mpi");
  no_fit.train(2, 0.015);
  const report::Run no_fit_run = report::load_run(no_fit.dir(), 0.1);
  const ModelCheck nf = check_model(no_fit_run);
  EXPECT_TRUE(nf.fits.empty());
  ASSERT_EQ(nf.unchecked.size(), 1u);
  EXPECT_NE(nf.unchecked[0].find("no allreduce of ours (ring, direct, rd) measured on tcp"), std::string::npos)
      << nf.unchecked[0];
}

// One 1 MB bucket ready at the end of a 10 ms backward, no optimizer; α 10 us, β 1 ns/B.
TEST(Extrapolate, EfficiencyFromTheOneRankTimeline) {
  const StepTimeline t{0.010, 0, {{1e6, 0.010}}};
  const LinkCost link{"x", 10e-6, 1e-9};
  const auto curve = scaling_curve(t, link, {1, 2, 4, 1024});
  ASSERT_EQ(curve.size(), 4u);
  EXPECT_DOUBLE_EQ(curve[0].ring_efficiency, 1);
  // N=4: ring 6·10 us + 1.5·1 ms = 1.56 ms; hd 4·10 us + 1.5 ms = 1.54 ms.
  EXPECT_NEAR(curve[2].ring_step_s, 0.010 + 60e-6 + 1.5e-3, 1e-12);
  EXPECT_NEAR(curve[2].hd_step_s, 0.010 + 40e-6 + 1.5e-3, 1e-12);
  EXPECT_NEAR(curve[2].ring_efficiency, 0.010 / curve[2].ring_step_s, 1e-12);
  EXPECT_NEAR(curve[2].latency_share, 60e-6 / 1.56e-3, 1e-12);
  // N=1024: the ring's 2046 messages (20.46 ms) against hd's 20 (0.2 ms).
  EXPECT_NEAR(curve[3].ring_step_s, 0.010 + 2046 * 10e-6 + 2 * 1023.0 / 1024 * 1e-3, 1e-12);
  EXPECT_NEAR(curve[3].hd_step_s, 0.010 + 20 * 10e-6 + 2 * 1023.0 / 1024 * 1e-3, 1e-12);
  // Latency outweighs bandwidth above N = B·β/α = 100.
  ASSERT_TRUE(latency_dominates_above(t, link).has_value());
  EXPECT_NEAR(*latency_dominates_above(t, link), 100, 1e-9);
  EXPECT_FALSE(latency_dominates_above(t, {"y", 0, 1e-9}).has_value());
  ASSERT_TRUE(hd_wins_from(curve).has_value());
  EXPECT_EQ(*hd_wins_from(curve), 1024);  // at N=4 hd saves 1.3% of the step, under the 5% margin
  EXPECT_EQ(powers_of_two_nodes(8), (std::vector<int>{1, 2, 4, 8}));
}

std::string what_if_yaml(const std::string& tcp_source = "assumed: test") {
  auto num = [](double v, const std::string& src) {
    return "{value: " + std::to_string(v) + ", source: \"" + src + "\"}";
  };
  auto transport = [&](const std::string& name, double gbps, double eff, const std::string& src) {
    return "  - name: " + name + "\n    link_gbps: " + num(gbps, "published: x") + "\n    efficiency: " +
           num(eff, src) + "\n    latency_us: " + num(10, "measured: y") + "\n    cpu_ns_per_byte: " +
           num(0, "derived: z") + "\n";
  };
  return "name: t\ncheck_nodes: 2\nnodes: [1, 2]\ngrid: {link_gbps: [8], compute_scale: [1]}\ntransports:\n" +
         transport("fast", 8, 1, "assumed: a") + transport("tcp", 8, 0.5, tcp_source) +
         "models:\n  - model: lenet\n    batch: 32\n    compute_s: " + num(0.02, "derived: w") + "\n";
}

TEST(WhatIf, EveryNumberNeedsItsSource) {
  const WhatIf w = parse_what_if(what_if_yaml(), "w.yaml");
  ASSERT_EQ(w.transports.size(), 2u);
  EXPECT_EQ(w.baseline, "tcp");  // the last transport unless named
  // 8 Gbit/s at half efficiency: 2 ns per byte; 10 us per message.
  EXPECT_NEAR(w.transports[1].cost().beta_s, 2e-9, 1e-18);
  EXPECT_NEAR(w.transports[1].cost().alpha_s, 10e-6, 1e-15);
  EXPECT_NEAR(w.transports[1].cost(16).beta_s, 1e-9, 1e-18);
  for (const std::string bad : {"", "a paper", "published:"}) {
    try {
      parse_what_if(what_if_yaml(bad), "w.yaml");
      ADD_FAILURE() << "accepted the source '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("w.yaml: transports[1].efficiency.source: every number needs its source"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(parse_what_if(what_if_yaml() + "colour: red\n", "w.yaml"), Error);
  EXPECT_THROW(parse_what_if(what_if_yaml() + "baseline: fast\n", "w.yaml"), Error);  // the first is compared
}

// Issue 38: check_nodes had no upper bound, and compute_s: 0 was refused "must be in [0.000, ...]".
TEST(WhatIf, NumbersOutOfRangeSayTheRangeTheyMiss) {
  const auto error_of = [](const std::string& yaml) -> std::string {
    try {
      parse_what_if(yaml, "w.yaml");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  std::string big = what_if_yaml();
  big.replace(big.find("check_nodes: 2"), 14, "check_nodes: 2000000000");
  EXPECT_NE(error_of(big).find("w.yaml: check_nodes: must be from 2 to 1048576 (got 2000000000)"), std::string::npos)
      << error_of(big);
  std::string zero = what_if_yaml();
  zero.replace(zero.find("compute_s: {value: 0.020000"), 27, "compute_s: {value: 0");
  EXPECT_NE(error_of(zero).find("models[0].compute_s.value: must be from 1e-09 to 1e+06 (got 0)"), std::string::npos)
      << error_of(zero);
}

TEST(WhatIf, ScalesTheMeasuredTimelineToTheDescribedCompute) {
  TempRun run;
  run.train(1, 0.012);  // compute 10 ms (4 + 6), two 1 MiB buckets ready at 6 and 9 ms, optimizer 2 ms
  const WhatIf w = parse_what_if(what_if_yaml(), "w.yaml");
  const report::Run loaded = report::load_run(run.dir(), 0.1);  // the results point into it
  const auto results = run_what_if(w, loaded);
  ASSERT_EQ(results.size(), 1u);
  const WhatIfResult& r = results[0];
  EXPECT_NEAR(r.timeline.compute_s, 0.02, 1e-12);
  EXPECT_NEAR(r.timeline.optimizer_s, 0.004, 1e-12);  // scaled like compute: none was given
  EXPECT_NEAR(r.timeline.buckets[1].ready_s, 0.018, 1e-12);
  // N=2 on "fast" (1 ns/B): bucket 1 is reduced 18 ms + 10 us·2 + 1 MiB·1 ns = 19.069 ms, before
  // backward ends at 20: nothing exposed.
  EXPECT_NEAR(r.links[0].curve[1].ring_efficiency, 1, 1e-12);
  ASSERT_EQ(r.ratio.size(), 1u);
  EXPECT_NEAR(r.ratio[0][0], r.links[0].curve[1].ring_efficiency / r.links[1].curve[1].ring_efficiency, 1e-12);
  TempRun empty;
  empty.collectives(50e-6, 2e-9);
  EXPECT_THROW(run_what_if(w, report::load_run(empty.dir(), 0.1)), Error);
}

// gradient_wire: fp16 (mixed precision, or --compression) halves the measured fp32 buckets.
TEST(WhatIf, Fp16GradientsOnTheWireHalveTheBuckets) {
  TempRun run;
  run.train(1, 0.012);
  const report::Run loaded = report::load_run(run.dir(), 0.1);
  const WhatIf fp32 = parse_what_if(what_if_yaml(), "w.yaml");
  const WhatIf fp16 = parse_what_if(what_if_yaml() + "    gradient_wire: fp16\n", "w.yaml");
  EXPECT_EQ(fp16.models[0].gradient_wire, "fp16");
  const auto a = run_what_if(fp32, loaded), b = run_what_if(fp16, loaded);
  ASSERT_EQ(a[0].timeline.buckets.size(), b[0].timeline.buckets.size());
  for (size_t i = 0; i < a[0].timeline.buckets.size(); ++i)
    EXPECT_EQ(b[0].timeline.buckets[i].bytes, a[0].timeline.buckets[i].bytes / 2);
  EXPECT_THROW(parse_what_if(what_if_yaml() + "    gradient_wire: int8\n", "w.yaml"), Error);
}

TEST(WhatIf, ShippedFilesLoad) {
  int n = 0;
  for (const auto& f : std::filesystem::directory_iterator(RINGBENCH_SOURCE_DIR "/configs")) {
    if (f.path().filename().string().rfind("whatif-", 0) != 0) continue;
    SCOPED_TRACE(f.path().string());
    const std::string text = read_config_file(f.path().string(), "the what-if file");
    ++n;
    if (is_remote_what_if(text)) {  // a remote GPU's (remote_whatif.h)
      const RemoteWhatIf r = parse_remote_what_if(text, f.path().string());
      EXPECT_FALSE(r.servers.empty());
      EXPECT_FALSE(r.transports.empty());
      continue;
    }
    const WhatIf w = parse_what_if(text, f.path().string());
    EXPECT_GE(w.transports.size(), 2u);
    EXPECT_FALSE(w.models.empty());
  }
  EXPECT_GE(n, 1);
}

}  // namespace
}  // namespace ringbench::predict

namespace ringbench::predict {
namespace {

// The hierarchical allreduce's model at 4 nodes x 2 ranks: bandwidth-bound, the flat 8-rank ring
// sends 14/8 of the buffer over each node link and the rings across the nodes 6/4 of it, so the
// gain tends to 1.75 / 1.5; latency-bound, 14 alpha against 6.
TEST(PredictHierarchical, TheGainIsTheRatioOfTheLinkTerms) {
  CostFit link;
  link.algo = "ring";
  link.alpha_s = 0;
  link.beta_s = 1e-8;
  const double b = 256.0 * (1 << 20);
  EXPECT_NEAR(link.seconds(8, b) / hierarchical_seconds(link, 4, b), 1.75 / 1.5, 1e-12);
  link.alpha_s = 1e-3;
  link.beta_s = 0;
  EXPECT_NEAR(link.seconds(8, b) / hierarchical_seconds(link, 4, b), 14.0 / 6.0, 1e-12);
  EXPECT_EQ(hierarchical_seconds(link, 1, b), 0.0);  // one node: nothing crosses a link
}


// The level within the node is what the hierarchical points took beyond the level across the
// nodes, with the ring's terms at R ranks: recovered exactly from times the model made.
TEST(PredictHierarchical, TheLevelWithinTheNodeIsFittedOnWhatTheLevelAcrossLeaves) {
  CostFit across;
  across.algo = "ring";
  across.alpha_s = 50e-6;
  across.beta_s = 8e-9;
  std::vector<CostSample> hier;
  for (double b = 65536; b <= 64 << 20; b *= 4)  // 4 nodes of 2: 6 alpha + 6/4 B beta, then 2 a + 2/2 B b
    hier.push_back({2, b, 6 * 50e-6 + 1.5 * b * 8e-9 + 2 * 20e-6 + b * 1e-9});
  const auto within = fit_within(across, 4, 2, hier);
  ASSERT_TRUE(within.has_value());
  EXPECT_NEAR(within->alpha_s / 20e-6, 1, 1e-6);
  EXPECT_NEAR(within->beta_s / 1e-9, 1, 1e-6);
  const HierCost cost{"tcp", 4, 2, across, within, 0};
  EXPECT_NEAR(cost.seconds(hier[2].bytes) / hier[2].seconds, 1, 1e-9);
  // Hierarchical points no slower than the level across alone leave nothing to fit: the level
  // across alone (an upper bound on the gain).
  for (auto& h : hier) h.seconds = hierarchical_seconds(across, 4, h.bytes);
  EXPECT_FALSE(fit_within(across, 4, 2, hier).has_value());
  const HierCost across_only{"tcp", 4, 2, across, std::nullopt, 0};
  EXPECT_DOUBLE_EQ(across_only.seconds(1 << 20), hierarchical_seconds(across, 4, 1 << 20));
}

// Pipelined in chunks, the levels overlap: the level within is free where the level across is the
// slower (K chunks across, plus one chunk's reduce-scatter and allgather), and the other way
// round; with either level free the chunks' times add up; a buffer of one chunk runs the levels
// one after the other.
TEST(PredictHierarchical, PipelinedLevelsCostTheSlowerOnePerChunkPlusFillAndDrain) {
  auto per_chunk = [](double time_per_chunk) { return [=](double b) { return time_per_chunk * b / 100; }; };
  auto zero = [](double) { return 0.0; };
  EXPECT_DOUBLE_EQ(pipelined_seconds(400, 100, per_chunk(1), per_chunk(1)), 4 * 1 + 0.5 + 0.5);
  EXPECT_DOUBLE_EQ(pipelined_seconds(400, 100, per_chunk(2), per_chunk(1)), 4 * 2 + 0.5 + 0.5);
  // Within-bound (each crossing done before the level within needs it): the level within never waits.
  EXPECT_DOUBLE_EQ(pipelined_seconds(400, 100, per_chunk(1), per_chunk(2)), 4 * 2);
  EXPECT_DOUBLE_EQ(pipelined_seconds(350, 100, per_chunk(1), zero), 3.5);
  EXPECT_DOUBLE_EQ(pipelined_seconds(350, 100, zero, per_chunk(1)), 3.5);
  CostFit across, within;
  across.algo = within.algo = "ring";
  across.alpha_s = 50e-6, across.beta_s = 8e-9;
  within.alpha_s = 20e-6, within.beta_s = 1e-9;
  const HierCost serial{"tcp", 4, 2, across, within, 0}, piped{"tcp", 4, 2, across, within, 1 << 20};
  const double b = 16 << 20;
  EXPECT_DOUBLE_EQ(piped.seconds(1 << 20), serial.seconds(1 << 20));  // one chunk
  const double x = hierarchical_seconds(across, 4, 1 << 20), w = within.seconds(2, 1 << 20);
  EXPECT_NEAR(piped.seconds(b), 16 * std::max(x, w) + w, 1e-12);
  EXPECT_LT(piped.seconds(b), serial.seconds(b));
}

// With flat, one-after-the-other (hier_chunk 0) and pipelined points, the level within is fitted
// on the one-after-the-other point (where the levels' times add up) and prices the pipelined one:
// its both-levels column is a prediction; the measured gain is the pipelined point's.
TEST(PredictHierarchical, TheSerialPointsFitTheLevelWithinAndThePipelinedOnesAreChecked) {
  const double alpha = 50e-6, beta = 8e-9, alpha_node = 20e-6, beta_node = 2e-9;
  CostFit across, within;
  across.algo = within.algo = "ring";
  across.alpha_s = alpha, across.beta_s = beta, within.alpha_s = alpha_node, within.beta_s = beta_node;
  const HierCost truth{"tcp", 4, 2, across, within, 4 << 20};
  TempRun run;
  run.cluster["ranks_per_node"] = 2;
  run.allreduce(4, false, [&](double b) { return across.seconds(8, b); }, 0, 1.0);
  run.allreduce(4, true, [&](double b) { return hierarchical_seconds(across, 4, b) + within.seconds(2, b); }, -1, 0.8);
  run.allreduce(4, true, [&](double b) { return truth.seconds(b); }, 4 << 20, 1.1);
  const report::Run loaded = report::load_run(run.dir(), 0.1);
  const auto predictions = predict_hierarchical(loaded, check_model(loaded).fits);
  ASSERT_EQ(predictions.size(), 1u);
  const HierCost& c = predictions[0].cost;
  EXPECT_EQ(c.chunk_bytes, size_t{4} << 20);
  ASSERT_TRUE(c.within.has_value());
  EXPECT_NEAR(c.within->beta_s / beta_node, 1, 1e-6);
  for (const HierRow& r : predictions[0].rows) {
    EXPECT_DOUBLE_EQ(r.hier_busbw, 1.1) << r.bytes;  // the pipelined point's
    EXPECT_DOUBLE_EQ(r.serial_busbw, 0.8) << r.bytes;
    ASSERT_TRUE(r.hier_model_s.has_value());
    EXPECT_NEAR(*r.hier_model_s / truth.seconds(double(r.bytes)), 1, 1e-6) << r.bytes;
  }
  const std::string md = md_hierarchical(predictions);
  EXPECT_NE(md.find("pipelined in chunks of 4M"), std::string::npos) << md;
  EXPECT_NE(md.find("levels one after the other hier/flat"), std::string::npos) << md;
  EXPECT_NE(md.find("| 16M | 1.000 | 1.100 | 0.800x | 1.100x |"), std::string::npos) << md;
}

// A sweep with train: {hierarchical: [false, true]}: the hierarchical point's measured gain over
// its flat peer beside the gain the flat point's replay predicts.
TEST(ModelCheck, AHierarchicalTrainPointChecksThePredictedGain) {
  const double alpha = 50e-6, beta = 1e-9, alpha_node = 10e-6, beta_node = 0.5e-9;
  TempRun run;
  run.cluster["ranks_per_node"] = 2;
  run.allreduce(2, false, [&](double b) { return 6 * alpha + 1.5 * b * beta; });
  run.allreduce(2, true, [&](double b) { return 2 * alpha + b * beta + 2 * alpha_node + b * beta_node; }, -1);
  run.train(2, 0.015);
  run.train(2, 0.012, true, true, true);
  const report::Run loaded = report::load_run(run.dir(), 0.1);
  const ModelCheck mc = check_model(loaded);
  ASSERT_EQ(mc.rows.size(), 2u) << (mc.unchecked.empty() ? "" : mc.unchecked[0]);
  const std::string md = md_hierarchical_training(mc);
  EXPECT_NE(md.find("measured gain"), std::string::npos) << md;
  EXPECT_NE(md.find("| 8533.3 | 1.250x | "), std::string::npos) << md;  // flat: 4 ranks x 32 / 0.015 s; gain 0.015 / 0.012
}

// A run of 2 nodes x 2 ranks: the flat train point's buckets are priced with the flat ring at its
// 4 ranks (not at its 2 nodes), and its step is also replayed with the hierarchical allreduce's
// two levels (across: the flat fit at 2 nodes; within: fitted on the hierarchical point). A
// point that ran --hierarchical is priced with the latter.
TEST(ModelCheck, SeveralRanksPerNodePriceTheRanksAndPredictTheHierarchicalStep) {
  const double alpha = 50e-6, beta = 1e-9, alpha_node = 10e-6, beta_node = 0.5e-9;
  auto flat = [&](double b) { return 6 * alpha + 1.5 * b * beta; };  // ring of 4
  auto hier = [&](double b) { return 2 * alpha + b * beta + 2 * alpha_node + b * beta_node; };
  // The step train() records, replayed with a cost per bucket (simulate_step is tested above).
  const StepTimeline timeline{0.010, 0.002, {{1 << 20, 0.006}, {1 << 20, 0.009}}};
  for (bool ran_hierarchical : {false, true}) {
    SCOPED_TRACE(ran_hierarchical ? "train --hierarchical" : "flat train");
    TempRun run;
    run.cluster["ranks_per_node"] = 2;
    run.allreduce(2, false, flat);
    run.allreduce(2, true, hier);
    run.train(2, 0.015, true, ran_hierarchical);
    const report::Run loaded = report::load_run(run.dir(), 0.1);
    const ModelCheck mc = check_model(loaded);
    ASSERT_EQ(mc.hier.size(), 1u);
    ASSERT_TRUE(mc.hier[0].within.has_value());
    EXPECT_NEAR(mc.hier[0].within->beta_s / beta_node, 1, 1e-6);
    ASSERT_EQ(mc.rows.size(), 1u) << (mc.unchecked.empty() ? "" : mc.unchecked[0]);
    const CheckRow& r = mc.rows[0];
    EXPECT_EQ(r.ranks, 4);
    EXPECT_EQ(r.hierarchical, ran_hierarchical);
    const double flat_step = simulate_step(timeline, flat).step_s, hier_step = simulate_step(timeline, hier).step_s;
    if (ran_hierarchical) {
      EXPECT_EQ(r.fit, "tcp hier 2x2");
      EXPECT_NEAR(r.predicted_s, hier_step, 1e-9);
      EXPECT_FALSE(r.predicted_hier_s.has_value());
    } else {
      EXPECT_EQ(r.fit, "tcp N=4");
      EXPECT_NEAR(r.predicted_s, flat_step, 1e-9);
      ASSERT_TRUE(r.predicted_hier_s.has_value());
      EXPECT_NEAR(*r.predicted_hier_s, hier_step, 1e-9);
      EXPECT_EQ(r.hier_fit, "tcp hier 2x2");
      EXPECT_NE(md_hierarchical_training(mc).find("| 4 | 15.0 |"), std::string::npos) << md_hierarchical_training(mc);
    }
  }
}

}  // namespace
}  // namespace ringbench::predict
