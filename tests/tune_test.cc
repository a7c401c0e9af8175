// `ringbench tune`'s model on synthetic timelines and cost models with a known optimum: rebucketing
// follows train's bucket planner, and the ranking finds the setting the cost model makes best.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runner/analysis/run.h"
#include "runner/sweep/sweep_config.h"
#include "runner/sweep/sweep_exec.h"
#include "runner/tune/cpu_term.h"
#include "runner/tune/tune_cmd.h"
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

// The CPU term on the latency-bound case above (β = 0: the link's time does not depend on the
// bytes, so fp16 saves nothing there). One core, one compute thread and two communication threads
// compete: at 1 ns of CPU per byte on the wire, fp32's 10 MiB cost 10.5 ms of the core a step and
// fp16's 5 MiB 5.2 ms, both above the link's 2 ms tail: fp16 ranks first, its step the core's
// (20 ms of compute + its charge). With a core to spare (4 cores, 2 + 2 threads) nothing is
// charged and the defaults rank first again.
TEST(Tune, TheCpuTermPicksTheSmallerWireTypeOnlyWhenCoresAreShared) {
  CpuTerm shared;
  shared.cpu_s_per_byte = 1e-9, shared.fitted_sizes = 3, shared.cores = 1, shared.compute_threads = 1,
  shared.comm_threads = 2;
  ASSERT_TRUE(shared.competes());
  const auto ranked = rank_settings(ten_tensors(), grid(), ring_cost(fit(1e-3, 0), 2), shared);
  EXPECT_EQ(knob(ranked.front(), "compression"), "fp16");
  EXPECT_DOUBLE_EQ(ranked.front().wire_bytes, 5 * MiB);
  EXPECT_DOUBLE_EQ(ranked.front().cpu_charge_s, 5 * MiB * 1e-9);
  EXPECT_NEAR(ranked.front().step_s, 20e-3 + 5 * MiB * 1e-9, 1e-12);
  EXPECT_GE(ranked.front().step_s, ranked.front().link_step_s);
  const auto def = std::find_if(ranked.begin(), ranked.end(), [](const Ranked& r) { return r.is_default; });
  EXPECT_NEAR(def->step_s, 20e-3 + 10 * MiB * 1e-9, 1e-12);  // fp32 on the wire
  EXPECT_TRUE(std::all_of(ranked.begin(), ranked.end(), [](const Ranked& r) {
    return r.step_s == std::max(r.link_step_s, r.core_step_s);
  }));

  CpuTerm spare = shared;
  spare.cores = 4, spare.compute_threads = 2, spare.comm_threads = 2;
  EXPECT_FALSE(spare.competes());
  const auto free_cores = rank_settings(ten_tensors(), grid(), ring_cost(fit(1e-3, 0), 2), spare);
  EXPECT_TRUE(free_cores.front().is_default);
  EXPECT_EQ(free_cores.front().cpu_charge_s, 0);
  EXPECT_NEAR(free_cores.front().step_s, 22e-3, 1e-12);
}

// The CPU per byte is the slope over the probe's sizes of at least 1M: a fixed per-call cost and
// the small sizes do not move it; one large size gives its ratio; none gives 0; never negative.
TEST(Tune, TheCpuPerByteIsTheSlopeOverTheLargeSizes) {
  auto cpu = [](double bytes) { return 50e-6 + 0.4e-9 * bytes; };
  int used = 0;
  EXPECT_NEAR(fit_cpu_per_byte({{4096, 1.0}, {1 << 20, cpu(1 << 20)}, {4 << 20, cpu(4 << 20)}, {16 << 20, cpu(16 << 20)}},
                               &used),
              0.4e-9, 1e-15);
  EXPECT_EQ(used, 3);
  EXPECT_NEAR(fit_cpu_per_byte({{4096, 1.0}, {1 << 20, 1e-3}}, &used), 1e-3 / (1 << 20), 1e-18);
  EXPECT_EQ(used, 1);
  EXPECT_EQ(fit_cpu_per_byte({{4096, 1.0}}, &used), 0);
  EXPECT_EQ(used, 0);
  EXPECT_EQ(fit_cpu_per_byte({{1 << 20, 2e-3}, {4 << 20, 1e-3}}), 0);
}

// A probe run's rows carry each size's CPU time (cpu_us, the ranks' mean); the run loader reads
// it back and the term is fitted from it, for the ring rows of that transport and N only, and
// recorded in tune.json with the threads and cores that decide whether it is charged. Rows
// without cpu_us (a probe from before the term) give a term that is not measured, not charged.
TEST(Tune, TheCpuTermIsReadFromTheProbesRecordsAndRecorded) {
  char tmpl[] = "/tmp/tune_test.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto record = [](const std::string& transport, bool with_cpu, double ns_per_byte) {
    nlohmann::json rows = nlohmann::json::array();
    for (uint64_t bytes = 4096; bytes <= 16 << 20; bytes *= 4) {
      nlohmann::json row = {{"bytes", bytes}, {"count", bytes / 4}, {"dtype", "float"}, {"inplace", false},
                            {"algo", bytes < 65536 ? "direct" : "ring"}, {"time_us", 1e-3 * double(bytes)},
                            {"algbw_gbps", 1}, {"busbw_gbps", 1}, {"p50_us", 1}, {"p99_us", 1}, {"wrong", 0}};
      if (with_cpu) row["cpu_us"] = 30 + 1e-3 * ns_per_byte * double(bytes);
      rows.push_back(row);
    }
    return nlohmann::json{
        {"schema", 1}, {"run_id", "t-1"}, {"sweep", "t"}, {"repeat", 1}, {"profile", "none"}, {"status", "ok"},
        {"error", ""}, {"started_at", "2026-11-29T00:00:00Z"}, {"cluster", {{"type", "emulated"}, {"link", "10gbit"}}},
        {"point", "collectives/n2/" + transport + "/none"}, {"kind", "collectives"}, {"nodes", 2},
        {"transport", transport}, {"collective", "allreduce"},
        {"collectives", {{"rows", rows}, {"meta", {{"impl", "ring"}, {"collective", "allreduce"}}}}}};
  };
  {
    std::ofstream out(dir + "/raw.jsonl");
    auto a = record("tcp", true, 0.5), b = record("verbs", true, 2.0), c = record("shm", false, 0);
    a["seq"] = 0, b["seq"] = 1, c["seq"] = 2;
    out << a.dump() << "\n" << b.dump() << "\n" << c.dump() << "\n";
  }
  const report::Run run = report::load_run(dir, 0.10);
  const CpuTerm tcp = cpu_term(run, "tcp", 2, 1, 1);
  EXPECT_NEAR(tcp.cpu_s_per_byte, 0.5e-9, 1e-15);
  EXPECT_EQ(tcp.fitted_sizes, 3);  // 1M, 4M, 16M
  EXPECT_EQ(tcp.min_bytes, double(1 << 20));
  EXPECT_EQ(tcp.max_bytes, double(16 << 20));
  EXPECT_EQ(tcp.compute_threads, 1);
  EXPECT_EQ(tcp.comm_threads, 2);  // the trainer's thread and the TCP transport's I/O thread
  EXPECT_TRUE(tcp.competes());
  const nlohmann::json j = tcp.to_json();
  EXPECT_NEAR(j["cpu_ns_per_byte"].get<double>(), 0.5, 1e-6);
  EXPECT_EQ(j["cores_per_node"], 1);
  EXPECT_EQ(j["competes"], true);
  EXPECT_NE(describe(tcp).find("0.500 ns"), std::string::npos) << describe(tcp);
  EXPECT_NEAR(cpu_term(run, "verbs", 2, 8, 1).cpu_s_per_byte, 2e-9, 1e-15);
  EXPECT_TRUE(cpu_term(run, "verbs", 2, 8, 1).competes());  // 8 compute threads + 2 on 8 cores
  const CpuTerm shm = cpu_term(run, "shm", 2, 1, 1);
  EXPECT_EQ(shm.fitted_sizes, 0);
  EXPECT_FALSE(shm.competes());
  EXPECT_NE(describe(shm).find("not measured"), std::string::npos);
  EXPECT_EQ(cpu_term(run, "tcp", 4, 1, 1).fitted_sizes, 0);  // no probe at N=4
  std::filesystem::remove_all(dir);
}

// The one-rank timeline probe computes on the cores a node of the tuned job will have, not on the
// whole machine: its compute is what the core bound (and every prediction) starts from. A config's
// own cpus_per_node is kept.
TEST(Tune, AJobsCpuTermNodeIsItsBusiestGroupOfRanksSharingCpus) {
  CpuTerm t;
  // Two emulated nodes on one host, CPUs apart: each node one rank, 1 thread on 1 CPU, plus
  // 2 communication threads; a third rank elsewhere with CPUs to spare.
  set_busiest_node(t, {{"a", {0}, 1}, {"a", {1}, 1}, {"b", {0, 1, 2, 3}, 1}}, 2);
  EXPECT_EQ(t.cores, 1);
  EXPECT_EQ(t.compute_threads, 1);
  EXPECT_EQ(t.comm_threads, 2);
  // Two ranks on the same CPUs of one host share them; the same CPU numbers on another host do not.
  set_busiest_node(t, {{"a", {0, 1}, 2}, {"a", {0, 1}, 2}, {"b", {0, 1}, 1}}, 1);
  EXPECT_EQ(t.cores, 2);
  EXPECT_EQ(t.compute_threads, 4);
  EXPECT_EQ(t.comm_threads, 2);
  // A GPU job: no compute threads on the CPU.
  set_busiest_node(t, {{"a", {0, 1}, 0}, {"b", {0, 1}, 0}}, 2);
  t.cpu_s_per_byte = 1e-9;
  EXPECT_FALSE(t.competes());
}

TEST(Tune, TheTimelineProbeRunsOnTheCoresOfTheSmallestTunedN) {
  auto config = [](const std::string& cluster) {
    return parse_sweep_config("name: t\nnodes: [4, 2]\ntransports: [tcp]\ncluster: {" + cluster +
                                  "}\ntrain: {models: [lenet], fusion_mb: [1, 4]}\n",
                              "t.yaml");
  };
  const SweepConfig c = config("type: local");
  const SweepConfig probe = timeline_probe(c, 7);
  EXPECT_EQ(probe.nodes, std::vector<int>{1});
  EXPECT_EQ(probe.train.steps, 7);
  EXPECT_EQ(probe.cluster.cpus_per_node, local_cpus_per_node(c, 2));
  EXPECT_GE(probe.cluster.cpus_per_node, 1);
  ASSERT_EQ(probe.train.axes.settings.size(), 1u);
  EXPECT_EQ(probe.train.axes.settings[0][axis_index("fusion_mb")], "0");
  EXPECT_EQ(timeline_probe(config("type: local, cpus_per_node: 3"), 7).cluster.cpus_per_node, 3);
}

// train --autotune's search on a fake job: the probe sees ten 1 MiB tensors and a ring of
// β = 1 ns/B, α = 0 (the bandwidth-bound case above); the samples' times are a table in which the
// second-best predicted setting is fastest. The search measures the top 2 and the defaults
// alternately, picks the best measured (not the best predicted), and leaves the job on it.
Ranked setting(const char* fusion_mb, const char* segment, double step_s) {
  Ranked r;
  r.axes = axis_defaults();
  r.axes[axis_index("fusion_mb")] = fusion_mb;
  r.axes[axis_index("segment")] = segment;
  r.step_s = step_s;
  return r;
}

TEST(Tune, NearTiesPutAnotherBucketSizeAmongTheMeasured) {
  std::vector<Ranked> ranked = {setting("1", "256K", 1.000), setting("1", "1M", 1.001), setting("1", "4M", 1.002),
                                setting("4", "256K", 1.010), setting("16", "256K", 1.015), setting("64", "256K", 1.100)};
  auto c = candidates(ranked, 3);
  ASSERT_EQ(c.size(), 3u);  // none of these is train's defaults
  EXPECT_EQ(c[0].axes, ranked[0].axes);
  EXPECT_EQ(knob(c[1], "fusion_mb"), "4");  // within 2% of the best: a tie, and a new bucket size
  EXPECT_EQ(knob(c[2], "fusion_mb"), "16");
  // No tie beyond the tolerance: the ranking stands.
  ranked[3].step_s = ranked[4].step_s = 1.05;
  c = candidates(ranked, 3);
  EXPECT_EQ(c[1].axes, ranked[1].axes);
  EXPECT_EQ(c[2].axes, ranked[2].axes);
  // Nor with no tolerance.
  ranked[3].step_s = ranked[4].step_s = 1.001;
  EXPECT_EQ(candidates(ranked, 3, 0)[1].axes, ranked[1].axes);
}

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
  job.allreduce = [](size_t bytes) { return AllreduceTiming{double(bytes) * 1e-9, double(bytes) * 2e-9}; };
  job.cpus = {"h", {0, 1, 2, 3, 4, 5, 6, 7}, 1};  // a CPU to spare: the term is not charged
  job.comm_threads_per_rank = 2;
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
  // The CPU term from the same probe (the test's shares give both ranks the same figures).
  EXPECT_NEAR(r.cpu.cpu_s_per_byte, 2e-9, 1e-15);
  EXPECT_EQ(r.cpu.cores, 8);
  EXPECT_EQ(r.cpu.compute_threads, 2);
  EXPECT_EQ(r.cpu.comm_threads, 4);
  EXPECT_FALSE(r.cpu.competes());
  EXPECT_TRUE(r.to_json()["cpu_term"].is_object());
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

  // Where the ranks' threads outnumber their CPUs, the ranking charges the term, as tune's does.
  job.cpus = {"h", {0, 1}, 2};
  const AutotuneResult shared = autotune(job, o, space, axis_defaults());
  EXPECT_TRUE(shared.cpu.competes());
  const auto charged = rank_settings(ten_tensors(), space, ring_cost(shared.fit, 2), shared.cpu);
  EXPECT_GT(charged[0].cpu_charge_s, 0);
  EXPECT_EQ(shared.samples[0].axes, charged[0].axes);
  EXPECT_DOUBLE_EQ(shared.samples[0].predicted_img_s, 2 * 8 / charged[0].step_s);
}

}  // namespace
}  // namespace ringbench::tune
