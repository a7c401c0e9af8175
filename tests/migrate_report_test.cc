// The report's "Live migration" section from a synthetic raw.jsonl of migrate points with known
// numbers: the stun table (median, min–max over repeats), a repeat whose rank did not move, the
// img/s at the stalled step, the stop-and-copy fit and pre-copy's model checked against numbers
// computed by hand, the predictions marked predicted, the plot, and the same bytes twice.
#include <gtest/gtest.h>

#include "runner/report/migrate_model.h"
#include "tests/report_fixture.h"

namespace ringbench::report_testing {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024, kMiB = 1024.0 * 1024;

// One repeat of a migrate point of mobilenet_v1 b8 96px on 3 nodes over tcp, 10 measured steps
// of 0.1 s after 5 of warmup, the migration starting once 7 steps are done (measured step 3);
// `stun_s` < 0: the rank did not move.
struct Run {
  std::string method, fb;
  int repeat;
  double stun_s, stun_mib;
  int stall_index = 4;  // the measured step (0-based) that waits for the stun
  bool forced = false;  // the run's last step forced the stun
};

json migrate_record(const Run& r, int seq, const std::string& link) {
  const bool moved = r.stun_s >= 0;
  const double fb = double(std::stoi(r.fb)) * kGiB;
  std::vector<double> steps(10, 0.1);
  if (moved) steps[size_t(r.stall_index)] += r.stun_s;
  const std::string point = "migrate/mobilenet_v1/b8/s96/n3/tcp/" + r.method + "/fb" + r.fb;
  json rec = {{"schema", 1}, {"run_id", "mig-20261127-010000"}, {"sweep", "mig"}, {"seq", seq},
              {"points_total", 12}, {"point", point}, {"repeat", r.repeat}, {"kind", "migrate"},
              {"nodes", 3}, {"transport", "tcp"}, {"profile", "none"}, {"model", "mobilenet_v1"}, {"batch", 8},
              {"image_size", 96}, {"method", r.method}, {"framebuffer", r.fb}, {"migrate_at", 7},
              {"cluster", {{"type", "emulated"}, {"link", link}, {"cpus_per_node", 1}, {"note", ""}}},
              {"status", "ok"}, {"error", ""}, {"started_at", "2026-11-27T01:00:" + std::to_string(10 + seq) + "Z"}};
  json m = {{"moved", moved}, {"rank", 2}, {"method", r.method}, {"to", "10.77.0.4:5000"}, {"netns", "rb7-n3"},
            {"framebuffer_bytes", fb}, {"state_bytes", 18 * kMiB}, {"precopy_rounds", r.method == "precopy" ? 3 : 0},
            {"precopy_bytes", r.method == "precopy" ? fb + 100 * kMiB : 0.0}, {"stun_bytes", r.stun_mib * kMiB},
            {"ring_stall_s", moved ? r.stun_s - 0.01 : 0.05}, {"forced_at_last_step", r.forced}};
  if (moved) m.update({{"stun_s", r.stun_s}, {"total_s", r.stun_s + 2}});
  if (!moved) m["error"] = "target 10.77.0.4:5000 unreachable";
  rec["migrate"] = {{"summary", {{"total_img_s", {{"mean", 200.0}}}, {"step_s", {{"mean_over_ranks", 0.12}}}}},
                    {"ranks", {{{"rank", 0}, {"step_s", steps}}, {{"rank", 1}, {"step_s", steps}}}},
                    {"meta", {{"warmup", 5}, {"steps", 10}, {"hosts", json::array()}}},
                    {"migration", m}};
  return rec;
}

// Stop-and-copy at 1, 2 and 4 GiB (stun 1.00/1.04, 1.80/1.90, 3.40/3.50 s): by least squares
// t0 = 0.220 s and 0.80857 s/GiB (R = 1.2367 GiB/s = 10.62 Gbit/s), R² = 0.99815, so 13.157 s at
// 16 GiB and 19.626 s at 24 GiB. Pre-copy's stun copies W = 40, 44, 42, 40, 41 MiB (median 41):
// t0 + W/R = 0.220 + 41/1024 × 0.80857 = 0.252 s; measured 0.24–0.27 s, median 0.25 s. Its 2 GiB
// repeat 2 did not move.
std::string migrate_jsonl(const std::string& link = "10gbit") {
  const std::vector<Run> runs = {
      {"precopy", "1G", 1, 0.25, 40, 6},   {"stopcopy", "1G", 1, 1.00, 1024}, {"precopy", "2G", 1, 0.26, 42, 6},
      {"stopcopy", "2G", 1, 1.80, 2048},   {"precopy", "4G", 1, 0.24, 40, 6}, {"stopcopy", "4G", 1, 3.40, 4096},
      {"precopy", "1G", 2, 0.27, 44, 6},   {"stopcopy", "1G", 2, 1.04, 1024}, {"precopy", "2G", 2, -1, 0},
      {"stopcopy", "2G", 2, 1.90, 2048},   {"precopy", "4G", 2, 0.25, 41, 6}, {"stopcopy", "4G", 2, 3.50, 4096}};
  std::string s;
  int seq = 0;
  for (const auto& r : runs) s += migrate_record(r, seq++, link).dump() + "\n";
  return s;
}

std::string migrate_report(const TempDir& dir, bool plots = false, const std::string& link = "10gbit") {
  ReportOptions o;
  o.plots = plots;
  write_report(make_run(dir, migrate_jsonl(link)), o);
  return read_file(dir.path() + "/report.md");
}

TEST(MigrateReport, StunTableGivesMedianAndRangeOverRepeats) {
  TempDir dir;
  const std::string md = section(migrate_report(dir), "## Live migration");
  EXPECT_TRUE(has_all(md, {
      "### mobilenet_v1 b8 96px on 3 nodes (tcp)",
      "Rank 2 moves to 10.77.0.4:5000 (namespace rb7-n3) once 7 steps are done (5 of them warmup), over 10gbit "
      "links",
      "| method | framebuffer | moved | stun s | stun MiB | pre-copy rounds | pre-copied MiB | total s | ring stall s |",
      "| pre-copy | 1 GiB | 2/2 | 0.260 (0.250–0.270) | 42.0 (40.0–44.0) | 3 | 1124 | 2.26 (2.25–2.27) | "
      "0.250 (0.240–0.260) |",
      "| pre-copy | 2 GiB | 1/2 | 0.260 | 42.0 | 3 | 2148 | 2.26 | 0.250 |",
      "| stop-and-copy | 4 GiB | 2/2 | 3.450 (3.400–3.500) | 4096.0 | 0 | 0 | 5.45 (5.40–5.50) | "
      "3.440 (3.390–3.490) |",
  }));
  // Pre-copy rows first, by framebuffer; then stop-and-copy's.
  EXPECT_LT(md.find("| pre-copy | 4 GiB"), md.find("| stop-and-copy | 1 GiB"));
  EXPECT_TRUE(has_all(md, {"Not moved, or forced:", "- `migrate/mobilenet_v1/b8/s96/n3/tcp/precopy/fb2G` repeat 2: the rank did "
                           "not move (target 10.77.0.4:5000 unreachable); it resumed on its node"}));
}

TEST(MigrateReport, ImgPerSecondAtTheStalledStepAgainstTheOthers) {
  TempDir dir;
  const std::string md = section(migrate_report(dir), "## Live migration");
  // 3 ranks × 8 images: 240 img/s at 0.1 s a step; stop-and-copy at 1 GiB stalls measured step 5
  // (step 10 with the warmup) for 1.00 and 1.04 s: 24 / 1.1 = 21.8 and 24 / 1.14 = 21.1 img/s, 9%.
  EXPECT_TRUE(has_all(md, {"| stop-and-copy | 1 GiB | 2 | 10 | 21.4 (21.1–21.8) | 240.0 | 9% |",
                           "| pre-copy | 1 GiB | 4 | 12 | 66.7 (64.9–68.6) | 240.0 | 28% (27%–29%) |"}))
      << md;
}

TEST(MigrateReport, ModelFitAndPredictionsMatchTheHandComputedNumbers) {
  TempDir dir;
  const std::string md = section(migrate_report(dir), "## Live migration");
  EXPECT_TRUE(has_all(md, {
      "stun = t0 + F / R, least squares over 6 runs at 3 framebuffer sizes: t0 = 0.220 s, R = 1.237 GiB/s "
      "(10.62 Gbit/s; the links: 10gbit), R² = 0.998. Linear in F: each GiB more adds 0.809 s of stun.",
      "working set W = 41.0 (40.0–44.0) MiB, whatever the framebuffer's size (the rank's state and activations take "
      "18.0 MiB of it): stun = t0 + W / R = 0.252 s by the model; measured 0.250 (0.240–0.270) s. Within vMotion's "
      "1 s stun at every size measured.",
      "**predicted, not measured**",
      "| pre-copy | 16 GiB | 0.252 (predicted) | yes (predicted) |",
      "| pre-copy | 24 GiB | 0.252 (predicted) | yes (predicted) |",
      "| stop-and-copy | 16 GiB | 13.157 (predicted) | no (predicted) |",
      "| stop-and-copy | 24 GiB | 19.626 (predicted) | no (predicted) |",
  })) << md;
}

// Where the copy ran slower than the links (here 10.62 Gbit/s on 100gbit links), pre-copy's stun at
// the line rate: 0.220 + 41 MiB × 8 / 100e9 = 0.223 s; not where it reached them (10gbit).
TEST(MigrateReport, PreCopyAtTheLineRateWhereTheCopyWasSlower) {
  TempDir fast, slow;
  EXPECT_TRUE(has_all(migrate_report(fast, false, "100gbit"),
                      {"- At the links' line rate (100gbit, which the copy did not reach here): pre-copy stun = t0 + "
                       "W / 100gbit = 0.223 s, for every framebuffer size."}));
  EXPECT_EQ(migrate_report(slow).find("line rate"), std::string::npos);
}

// A stun the run's last step forced is in the tables, but neither in the model nor in the plot.
TEST(MigrateReport, AStunForcedAtTheLastStepIsLeftOutOfTheModel) {
  TempDir dir;
  const std::string raw =
      migrate_jsonl() + migrate_record({"precopy", "8G", 1, 9.0, 2000, 6, true}, 12, "10gbit").dump() + "\n";
  write_report(make_run(dir, raw), no_plots());
  const std::string md = section(read_file(dir.path() + "/report.md"), "## Live migration");
  EXPECT_TRUE(has_all(md, {"| pre-copy | 8 GiB | 1/1 | 9.000 | 2000.0 |",
                           "- `migrate/mobilenet_v1/b8/s96/n3/tcp/precopy/fb8G` repeat 1: the run's last step forced "
                           "the stun",
                           "its working set W = 41.0 (40.0–44.0) MiB", "= 0.252 s by the model; measured 0.250 "
                           "(0.240–0.270) s. Within vMotion's 1 s stun at every size measured (the stuns the last step "
                           "forced aside)."}))
      << md;
}

TEST(MigrateReport, FitNeedsTwoSizes) {
  using report::fit_stun;
  EXPECT_FALSE(fit_stun({{kGiB, 1.0}, {kGiB, 1.1}}));
  const auto f = fit_stun({{kGiB, 1.0}, {2 * kGiB, 2.0}});
  ASSERT_TRUE(f);
  EXPECT_NEAR(f->t0_s, 0, 1e-12);
  EXPECT_NEAR(f->rate_bytes_s(), kGiB, 1e-3);
  EXPECT_NEAR(f->r2, 1, 1e-12);
  EXPECT_EQ(f->sizes, 2u);
  EXPECT_EQ(report::tc_rate_bits("10gbit"), 10e9);
  EXPECT_EQ(report::tc_rate_bits("2.5mbit"), 2.5e6);
  EXPECT_FALSE(report::tc_rate_bits("fast"));
  EXPECT_FALSE(report::tc_rate_bits("10gbps"));
}

TEST(MigrateReport, SummaryCsvHasTheJobsImgPerSecond) {
  TempDir dir;
  migrate_report(dir);
  const Csv csv(read_file(dir.path() + "/summary.csv"));
  expect_cells(csv, {{"migrate/mobilenet_v1/b8/s96/n3/tcp/stopcopy/fb4G", "kind", "migrate"},
                     {"migrate/mobilenet_v1/b8/s96/n3/tcp/stopcopy/fb4G", "total_img_s_median", "200.00"},
                     {"migrate/mobilenet_v1/b8/s96/n3/tcp/precopy/fb2G", "repeats_ok", "2"}});
}

TEST(MigrateReport, PlotHasBothMethodsMeasuredAndPredictedAndTheOneSecondLine) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
  TempDir dir;
  const std::string md = migrate_report(dir, true);
  EXPECT_NE(md.find("](plots/migration-stun.svg)"), std::string::npos);
  const std::string base = dir.path() + "/plots/migration-stun";
  EXPECT_NE(read_file(base + ".svg").find("<svg"), std::string::npos);
  EXPECT_TRUE(has_all(read_file(base + ".dat"), {"# stop-and-copy, measured", "1 1.02 1 1.04", "4 3.45 3.4 3.5",
                                                  "# stop-and-copy, predicted", "16 13.1571", "24 19.6257",
                                                  "# pre-copy, measured", "# pre-copy, predicted", "16 0.252374"}));
  EXPECT_TRUE(has_all(read_file(base + ".gp"), {"with yerrorbars pt 7", "with points pt 6", "with points pt 4",
                                                 "0.22 + 0.808571*x", "1 with lines dt 2", "vMotion stun target"}));
}

TEST(MigrateReport, SameRawJsonlGivesTheSameBytes) {
  TempDir a, b;
  EXPECT_EQ(migrate_report(a), migrate_report(b));
}

TEST(MigrateReport, RunsWithoutMigratePointsHaveNoSuchSection) {
  TempDir dir;
  write_report(make_run(dir, standard_sweep().jsonl()), no_plots());
  EXPECT_EQ(read_file(dir.path() + "/report.md").find("Live migration"), std::string::npos);
}

}  // namespace
}  // namespace ringbench::report_testing
