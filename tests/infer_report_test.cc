// The report's Inference section from a synthetic raw.jsonl with infer points: the Offline,
// SingleStream and Server tables with LoadGen's validity, MobileNet v1 against Inception v3,
// summary.csv's row, runs without infer points reported as before, and points under vGPU profiles
// and with k VMs serving at once: the QPS at the p99 bound per profile and policy.
#include "tests/report_fixture.h"

#include "runner/analysis/run.h"

namespace ringbench::report_testing {
namespace {

json validity(bool valid, const std::vector<std::string>& reasons) {
  return {{"valid", valid}, {"reasons", reasons}};
}

json latency(double p50_ms, double p90_ms, double p99_ms) {
  return {{"p50_s", p50_ms / 1e3}, {"p90_s", p90_ms / 1e3}, {"p99_s", p99_ms / 1e3}, {"count", 100}};
}

// A server run at `qps` with p99 `p99_ms` against a 50 ms bound.
json server_run(double qps, double p99_ms) {
  std::vector<std::string> reasons = {"min duration 600 s", "min queries 270336"};
  if (p99_ms > 50) reasons.push_back("p99 " + std::to_string(int(p99_ms)) + " ms > 50 ms bound");
  return {{"scenario", "Server"}, {"target_qps", qps}, {"completed_qps", qps * 1.01},
          {"latency", latency(p99_ms / 3, p99_ms / 2, p99_ms)}, {"tail_latency_s", p99_ms / 1e3},
          {"latency_bound_s", 0.05}, {"bound_met", p99_ms <= 50}, {"validity", validity(false, reasons)}};
}

// One infer point's records: Offline at batches 1, 2, 4 (`base` samples/s at batch 1, then
// 1.5x and 2x), SingleStream, and a Server search that found `peak` QPS.
void add_infer(Sweep& s, const std::string& model, int image_size, const std::vector<double>& bases, double peak) {
  const std::string point = "infer/" + model + "/b4/s" + std::to_string(image_size) + "/none";
  for (int rep = 1; rep <= int(bases.size()); ++rep) {
    const double base = bases[size_t(rep - 1)];
    json rec = s.common(point, rep, "infer", 1, "none");
    rec.update({{"model", model}, {"batch", 4}, {"image_size", image_size}});
    json offline = json::array();
    for (auto [batch, factor] : {std::pair{1, 1.0}, {2, 1.5}, {4, 2.0}})
      offline.push_back({{"scenario", "Offline"}, {"batch", batch}, {"samples_per_s", base * factor},
                         {"validity", validity(false, {"min duration 600 s", "min samples 24576"})}});
    json tries = json::array({{{"qps", 10.0}, {"result", server_run(10, 20)}},
                              {{"qps", peak}, {"result", server_run(peak, 40)}},
                              {{"qps", peak * 1.05}, {"result", server_run(peak * 1.05, 60)}}});
    rec["infer"] = {
        {"meta", {{"input", "3x" + std::to_string(image_size) + "x" + std::to_string(image_size)},
                  {"backend", "onednn"}, {"device", "cpu"}, {"threads", 2}, {"allowed_batches", {1, 2, 4}}}},
        {"offline", offline},
        {"single_stream", {{"scenario", "SingleStream"}, {"qps", 1000 / (base / 100)},
                           {"latency", latency(1000 / base, 1200 / base, 1280 / base)},
                           {"validity", validity(false, {"min duration 600 s", "min queries 1024"})}}},
        {"server", {{"found", true}, {"peak_qps", peak}, {"upper_qps", peak * 1.05}, {"tries", tries}}}};
    s.records.push_back(rec);
  }
}

Sweep infer_sweep() {
  Sweep s = standard_sweep();
  add_infer(s, "mobilenet_v1", 96, {200, 220}, 80);
  add_infer(s, "inception_v3", 128, {40, 40}, 20);
  return s;
}

std::string report_of(const Sweep& s, const TempDir& dir, bool plots = false) {
  make_run(dir, s.jsonl());
  ReportOptions o = no_plots();
  o.plots = plots;
  write_report(dir.path(), o);
  return read_file(dir.path() + "/report.md");
}

TEST(InferReport, OfflineSingleStreamAndServerTablesWithLoadGenValidity) {
  TempDir dir;
  const std::string md = section(report_of(infer_sweep(), dir), "## Inference");
  ASSERT_FALSE(md.empty());
  EXPECT_TRUE(has_all(md, {"### mobilenet_v1 96px, batches up to 4 (infer/mobilenet_v1/b4/s96/none)",
                           "Input 3x96x96, backend onednn on cpu, 2 thread(s); 2 ok repeat(s) of 2.",
                           // medians over the repeats: (200 + 220) / 2, x1.5, x2
                           "| 1 | 210.0 | INVALID (min duration 600 s, min samples 24576) |",
                           "| 2 | 315.0 | INVALID", "| 4 | 420.0 | INVALID",
                           "SingleStream", "| p50 ms | p90 ms | p99 ms | QPS | LoadGen |",
                           "INVALID (min duration 600 s, min queries 1024)",
                           "within 50.0 ms", "| peak QPS | p99 ms at the peak | missed at QPS | runs |",
                           "| 80.0 | 40.00 | 84.0 | 6 | INVALID (min duration 600 s, min queries 270336) |",
                           "### inception_v3 128px, batches up to 4", "| 1 | 40.0 |"}));
  // No profile and no shared device: no vGPU table.
  EXPECT_EQ(md.find("QPS at the p99 bound per profile and policy"), std::string::npos);
  // Inception's section comes before MobileNet's (models in name order), both before the ratio.
  EXPECT_LT(md.find("### inception_v3"), md.find("### mobilenet_v1"));
  EXPECT_LT(md.find("### mobilenet_v1"), md.find("### MobileNet v1 against Inception v3"));
}

TEST(InferReport, MobileNetAgainstInceptionNextToTheirMacRatio) {
  TempDir dir;
  const std::string md = section(report_of(infer_sweep(), dir), "### MobileNet v1 against Inception v3");
  ASSERT_FALSE(md.empty());
  // 210 / 40, 315 / 60, 420 / 80: 5.25x at every batch; the MACs counted from the graphs at
  // 128 and 96 px (7x: Inception's unpadded convolutions shrink more at small sizes), and at
  // full size near the published 8.8x.
  EXPECT_TRUE(has_all(md, {"| 1 | 96px | 210.0 | 128px | 40.0 | 5.25× |", "| 2 | 96px | 315.0 | 128px | 60.0 | 5.25× |",
                           "| 4 | 96px | 420.0 | 128px | 80.0 | 5.25× |", "about 5,000M and 569M, 8.8×"}));
  const std::string row = "| 1 | 96px | 210.0 | 128px | 40.0 | 5.25× | ";
  ASSERT_NE(md.find(row), std::string::npos) << md;
  const double macs = std::stod(md.substr(md.find(row) + row.size()));
  EXPECT_GT(macs, 6.0) << md;
  EXPECT_LT(macs, 9.0) << md;
  const size_t full = md.find("M MACs: ");
  ASSERT_NE(full, std::string::npos) << md;
  const double full_ratio = std::stod(md.substr(full + 8));
  EXPECT_GT(full_ratio, 8.0) << md;
  EXPECT_LT(full_ratio, 11.0) << md;
}

TEST(InferReport, NoRatioWithoutBothModels) {
  Sweep s = standard_sweep();
  add_infer(s, "mobilenet_v1", 96, {200}, 80);
  TempDir dir;
  const std::string md = report_of(s, dir);
  EXPECT_NE(md.find("## Inference"), std::string::npos);
  EXPECT_EQ(md.find("MobileNet v1 against Inception v3"), std::string::npos);
}

TEST(InferReport, SummaryCsvRowAndTransportPath) {
  TempDir dir;
  const std::string md = report_of(infer_sweep(), dir);
  const Csv csv(read_file(dir.path() + "/summary.csv"));
  // Offline samples/s at the largest batch, median over the repeats (400, 440).
  expect_cells(csv, {{"infer/mobilenet_v1/b4/s96/none", "kind", "infer"},
                     {"infer/mobilenet_v1/b4/s96/none", "batch", "4"},
                     {"infer/mobilenet_v1/b4/s96/none", "total_img_s_median", "420.00"},
                     {"infer/inception_v3/b4/s128/none", "total_img_s_median", "80.00"}});
  EXPECT_NE(md.find("| infer/mobilenet_v1/b4/s96/none | n/a | n/a (one process, no transport) |"), std::string::npos);
}

TEST(InferReport, FailedPointSaysSoAndServerAtOneRate) {
  Sweep s = standard_sweep();
  add_infer(s, "mobilenet_v1", 96, {200}, 80);
  s.records.back()["infer"]["server"] = {{"runs", json::array({server_run(30, 12)})}};
  add_infer(s, "inception_v3", 128, {40}, 20);
  s = without_result(s, "infer/inception_v3/b4/s128/none", "failed", "timed out after 60 s and was killed");
  s.records.back().erase("infer");
  TempDir dir;
  const std::string md = section(report_of(s, dir), "## Inference");
  EXPECT_TRUE(has_all(md, {"Server at one rate, p99 bound 50.0 ms", "| completed QPS | p99 ms | runs | LoadGen |",
                           "| 30.3 | 12.00 | 1 | INVALID", "### inception_v3 128px, batches up to 4",
                           "No results: failed"}));
}

TEST(InferReport, ReportIsDeterministicAndPlotted) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot not installed";
  TempDir a, b;
  const std::string ma = report_of(infer_sweep(), a, true), mb = report_of(infer_sweep(), b, true);
  EXPECT_EQ(ma, mb);
  EXPECT_NE(ma.find("](plots/infer-mobilenet_v1.svg)"), std::string::npos);
  EXPECT_TRUE(fs::exists(a.path() + "/plots/infer-inception_v3.svg"));
  EXPECT_NE(ma.find("](plots/infer-mobilenet-vs-inception.svg)"), std::string::npos);
  EXPECT_NE(read_file(a.path() + "/plots/infer-mobilenet-vs-inception.gp").find("8.8 with lines"), std::string::npos);
  EXPECT_EQ(read_file(a.path() + "/plots/infer-mobilenet_v1.dat"), read_file(b.path() + "/plots/infer-mobilenet_v1.dat"));
}

TEST(InferReport, RunsWithoutInferPointsAreReportedAsBefore) {
  TempDir a, b;
  const std::string before = report_of(standard_sweep(), a);
  EXPECT_EQ(before.find("Inference"), std::string::npos);
  // The infer records add their section and rows and change nothing else of the report.
  const std::string with = report_of(infer_sweep(), b);
  std::string stripped = with;
  const size_t start = stripped.find("## Inference"), end = stripped.find("\n## ", start + 1);
  stripped.erase(start, end + 1 - start);
  for (const std::string id : {"infer/mobilenet_v1/b4/s96/none", "infer/inception_v3/b4/s128/none"}) {
    const size_t row = stripped.find("| " + id + " |");
    ASSERT_NE(row, std::string::npos) << id;
    stripped.erase(row, stripped.find('\n', row) + 1 - row);
  }
  EXPECT_EQ(section(stripped, "## lenet"), section(before, "## lenet"));
  EXPECT_EQ(section(stripped, "## Where the time goes"), section(before, "## Where the time goes"));
  EXPECT_EQ(section(stripped, "## Collectives"), section(before, "## Collectives"));
}

// A results directory is untrusted: an ok record without its section is an error naming the
// line, not a point quietly left out.
TEST(InferReport, OkRecordWithoutItsInferSectionIsAnError) {
  Sweep s = standard_sweep();
  add_infer(s, "mobilenet_v1", 96, {200}, 80);
  s.records.back().erase("infer");
  TempDir dir;
  try {
    report_of(s, dir);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 20: status ok but the infer section is missing"), std::string::npos)
        << e.what();
  }
}

// ---- Profiles and k VMs serving at once

// One serving VM's results as `ringbench infer` writes them: Offline at batch 4 and a Server
// search that found `qps` with p99 `p99_ms` (qps 0: no rate met the bound); device utilization
// `util` (< 0: no scheduler).
json vm_results(double offline, double qps, double p99_ms, double util) {
  json tries = json::array({{{"qps", 10.0}, {"result", server_run(10, 20)}}});
  if (qps > 0) tries.push_back({{"qps", qps}, {"result", server_run(qps, p99_ms)}});
  json v = {{"offline", json::array({{{"scenario", "Offline"}, {"batch", 4}, {"samples_per_s", offline},
                                      {"validity", validity(false, {"min duration 600 s"})}}})},
            {"server", {{"found", qps > 0}, {"peak_qps", qps}, {"upper_qps", qps * 1.05}, {"tries", tries}}}};
  if (util >= 0) v["device"] = {{"utilization", util}, {"memory_mib", 40.0}};
  if (util >= 0) v["single_stream"] = {{"latency", latency(5, 8, p99_ms / 2)}};
  return v;
}

// Infer records of mobilenet_v1 96px under `profile`: alone (policy "") or `vms` VMs under
// `policy`, one repeat per element of `qps` (each VM's QPS at the bound; offline = 3 x QPS).
void add_served(Sweep& s, const std::string& profile, const std::string& policy, int vms,
                const std::vector<std::vector<double>>& qps, double util_total) {
  const std::string point = "infer/mobilenet_v1/b4/s96/" + profile + (policy.empty() ? "" : "/" + policy + "/vms" +
                                                                          std::to_string(vms));
  for (int rep = 1; rep <= int(qps.size()); ++rep) {
    json rec = s.common(point, rep, "infer", 1, "none");
    rec.update({{"model", "mobilenet_v1"}, {"batch", 4}, {"image_size", 96}, {"profile", profile}});
    const json meta = {{"input", "3x96x96"}, {"backend", "onednn"}, {"device", "cpu"}, {"threads", 2},
                       {"vgpu", {{"mode", "emulated"}, {"message", "emulated here"}, {"framebuffer_mib", 4096}}}};
    const auto& q = qps[size_t(rep - 1)];
    if (policy.empty()) {
      rec["infer"] = vm_results(3 * q[0], q[0], 30, -1);
      rec["infer"]["meta"] = meta;
    } else {
      rec.update({{"policy", policy}, {"vms", vms}});
      json list = json::array();
      for (size_t i = 0; i < q.size(); ++i) list.push_back(vm_results(3 * q[i], q[i], 40 + 10 * double(i), 0.4));
      rec["infer"] = {{"meta", meta}, {"vms", list}, {"summary", {{"device_util_total", util_total}}}};
    }
    s.records.push_back(rec);
  }
}

Sweep served_sweep() {
  Sweep s = standard_sweep();
  add_infer(s, "mobilenet_v1", 96, {200, 220}, 80);
  add_served(s, "T4-4C", "", 1, {{80}, {90}}, 0);
  add_served(s, "T4-4C", "best_effort", 1, {{100}, {110}}, 0.5);
  add_served(s, "T4-4C", "best_effort", 2, {{50, 40}, {60, 50}}, 0.9);
  add_served(s, "T4-4C", "fixed_share", 2, {{20, 0}, {25, 30}}, 0.45);
  return s;
}

TEST(InferReport, QpsAtTheBoundPerProfileAndPolicyPerVmAndInTotal) {
  TempDir dir;
  const std::string md = section(report_of(served_sweep(), dir), "## Inference");
  const std::string part = md.substr(md.find("### QPS at the p99 bound per profile and policy"));
  EXPECT_TRUE(has_all(part, {
      "| model | profile | scheduler | VMs | QPS at the bound per VM | each VM | total QPS | p99 ms |",
      "| mobilenet_v1 b4 96px | none | none (alone) | 1 | 80.0 | - | 80.0 | 40.00 | - | - | INVALID",
      "| mobilenet_v1 b4 96px | T4-4C | none (alone) | 1 | 85.0 | - | 85.0 | 30.00 | - | - | INVALID",
      "| mobilenet_v1 b4 96px | T4-4C | best_effort | 1 | 105.0 | - | 105.0 | 40.00 | 40% | 50% |",
      // per repeat the VMs' mean (45, 55) and sum (90, 110); each VM's median (55 / 45)
      "| mobilenet_v1 b4 96px | T4-4C | best_effort | 2 | 50.0 | 55.0 / 45.0 | 100.0 | 45.00 (40.0 / 50.0) | 40% | 90% |",
      // repeat 1: VM 1 met the bound at no rate, so only repeat 2 has a total
      "| mobilenet_v1 b4 96px | T4-4C | fixed_share | 2 | 27.5 (1 of 2 repeats) | 22.5 / 30.0 | 55.0 |",
      "Offline samples/s per VM", "| mobilenet_v1 b4 96px | T4-4C | best_effort | 2 | 4 | 150.0 | 165.0 / 135.0 | 300.0 |",
      // SingleStream per VM: p99 half the Server's (40 and 50 ms)
      "SingleStream latency per VM", "| mobilenet_v1 b4 96px | T4-4C | best_effort | 2 | 5.00 | 8.00 | 22.50 | 20.0 / 25.0 |"}));
  // Alone under a profile: its own subsection, named with the profile.
  EXPECT_NE(md.find("### mobilenet_v1 96px, batches up to 4, T4-4C (infer/mobilenet_v1/b4/s96/T4-4C)"),
            std::string::npos);
  EXPECT_EQ(md.find("(infer/mobilenet_v1/b4/s96/T4-4C/best_effort/vms2)"), std::string::npos);  // only in the table
}

TEST(InferReport, SharedPointsInTheVgpuSectionAndSummaryCsv) {
  TempDir dir;
  const std::string md = report_of(served_sweep(), dir);
  EXPECT_TRUE(has_all(section(md, "## vGPU profiles"), {"| T4-4C | T4 | 4096 |", "each an independent inference job"}));
  const Csv csv(read_file(dir.path() + "/summary.csv"));
  const std::string shared = "infer/mobilenet_v1/b4/s96/T4-4C/best_effort/vms2";
  expect_cells(csv, {{shared, "policy", "best_effort"}, {shared, "vms", "2"},
                     {shared, "device_util_total", "0.9000"}, {shared, "framebuffer_mib", "4096"},
                     {"infer/mobilenet_v1/b4/s96/T4-4C", "vms", ""}});
}

TEST(InferReport, SharedPointsPlottedByProfileAndPolicy) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot not installed";
  TempDir dir;
  const std::string md = report_of(served_sweep(), dir, true);
  EXPECT_NE(md.find("](plots/mobilenet_v1-infer-share-qps.svg)"), std::string::npos);
  const std::string gp = read_file(dir.path() + "/plots/mobilenet_v1-infer-share-qps.gp");
  EXPECT_TRUE(has_all(gp, {"'best_effort, 1 VM, per VM'", "'best_effort, 2 VMs, per VM'", "'best_effort, 2 VMs, total'",
                           "'fixed_share, 2 VMs, per VM'", "set xtics ('T4-4C' 0)"}));
  expect_same_bytes(served_sweep().jsonl());
}

}  // namespace
}  // namespace ringbench::report_testing
