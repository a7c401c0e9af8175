// `ringbench report` and `ringbench compare` on synthetic raw.jsonl files with known numbers:
// scaling efficiency, transport ratios, stragglers, failures, determinism, and the exit code.
#include "tests/report_fixture.h"

namespace ringbench {
namespace {

using namespace report_testing;
using report_testing::compare;  // beside this file's compare(b_scale, threshold)

TEST(Report, ScalingEfficiencyAndRatiosInSummaryCsv) {
  TempDir dir;
  write_report(make_run(dir, standard_sweep().jsonl()), no_plots());
  const Csv csv(read_file(dir.path() + "/summary.csv"));
  expect_cells(csv, {{kN2Tcp, "efficiency_mean", "0.9000"},
                     {kN2Tcp, "total_img_s_median", "180.00"},
                     {kN2Tcp, "repeats_ok", "3"},
                     {kN2Tcp, "ratio_vs_tcp_mean", ""},
                     {kN4Tcp, "efficiency_mean", "0.8000"},
                     {"train/lenet/b32/n1/none/none", "efficiency_mean", "1.0000"},
                     {"train/lenet/b32/n2/mpi/none", "ratio_vs_tcp_mean", "1.1000"},
                     {kN2Tcp, "hidden_fraction", "0.4000"},
                     {"train/mobilenet_v1/b16/n2/tcp/none", "repeats_failed", "1"},
                     {"train/mobilenet_v1/b16/n2/tcp/none", "total_img_s_median", ""},
                     {"collectives/n4/tcp/none", "busbw_at_bytes", std::to_string(64 << 20)}});
  EXPECT_NEAR(std::stod(csv.at("train/lenet/b32/n4/mpi/none", "ratio_vs_tcp_mean")), 1.09375, 1e-4);
  EXPECT_GT(std::stod(csv.at("train/lenet/b32/n4/mpi/none", "ratio_vs_tcp_ci95")), 0);
  EXPECT_NEAR(std::stod(csv.at("collectives/n4/tcp/none", "busbw_gbps_max")), 0.9135, 0.001);

  const std::string md = read_file(dir.path() + "/report.md");
  EXPECT_NE(md.find("| 2 | tcp | none | 180.0 ± 0.0 | 90.0 | 0.900 ± 0.000 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("### mpi vs tcp"), std::string::npos) << md;
  EXPECT_NE(md.find("| 2 | none | 198.0 | 180.0 | 1.100× ± 0.000 |"), std::string::npos) << md;
}

TEST(Report, EfficiencyNeedsAnN1Point) {
  Sweep s;
  s.train(2, "tcp", {180});
  TempDir dir;
  write_report(make_run(dir, s.jsonl()), no_plots());
  const Csv csv(read_file(dir.path() + "/summary.csv"));
  EXPECT_EQ(csv.at(kN2Tcp, "efficiency_mean"), "");
  EXPECT_EQ(csv.at(kN2Tcp, "total_img_s_ci95"), "");  // one repeat: no interval
  const std::string md = read_file(dir.path() + "/report.md");
  EXPECT_NE(md.find("| 2 | tcp | none | 180.0 | 90.0 | n/a (no N=1 point) |"), std::string::npos) << md;
}

TEST(Report, FailedAndSkippedPointsListedWithTheirError) {
  TempDir dir;
  write_report(make_run(dir, standard_sweep().jsonl()), no_plots());
  const std::string failures = section(read_file(dir.path() + "/report.md"), "## Failed and skipped");
  EXPECT_TRUE(has_all(failures, {"- `train/mobilenet_v1/b16/n2/tcp/none` repeat 1: failed: rank 1 (10.77.0.2:41234) "
                                 "closed the connection: the process died or was killed",
                                 "- `train/lenet/b32/n4/nccl/none` repeat 1: skipped: transport nccl is not in this "
                                 "build (RINGBENCH_WITH_NCCL=OFF)"}));
  const std::string md = read_file(dir.path() + "/report.md");
  EXPECT_NE(md.find("Points: 6 ok, 1 failed, 1 skipped (repeats: 17 ok, 1 failed, 1 skipped)."),
            std::string::npos) << md;
}

TEST(Report, StragglerFlaggedWithItsRankAndHostOnly) {
  TempDir dir;
  write_report(make_run(dir, standard_sweep().jsonl()), no_plots());
  const std::string stragglers = section(read_file(dir.path() + "/report.md"), "## Stragglers");
  EXPECT_NE(stragglers.find("more than 10%"), std::string::npos) << stragglers;
  EXPECT_NE(stragglers.find("| " + kN4Tcp + " | 2 | 3 | node3 | 0.6000 | 0.4000 | 50% |"),
            std::string::npos) << stragglers;
  size_t rows = 0;
  for (size_t at = stragglers.find("| train/"); at != std::string::npos;
       at = stragglers.find("| train/", at + 1))
    ++rows;
  EXPECT_EQ(rows, 1u) << stragglers;
  const Csv csv(read_file(dir.path() + "/summary.csv"));
  EXPECT_EQ(csv.at(kN4Tcp, "stragglers"), "1");
  EXPECT_EQ(csv.at(kN2Tcp, "stragglers"), "0");
  EXPECT_EQ(csv.at("train/lenet/b32/n4/mpi/none", "stragglers"), "0");
}

TEST(Report, CollectivesTableAndTransportPath) {
  TempDir dir;
  write_report(make_run(dir, standard_sweep().jsonl()), no_plots());
  const std::string md = read_file(dir.path() + "/report.md");
  const std::string coll = section(md, "## Collectives");
  EXPECT_NE(coll.find("| 4K | rd |"), std::string::npos) << coll;
  EXPECT_NE(coll.find("| 1M | ring |"), std::string::npos) << coll;
  EXPECT_NE(coll.find("0.609 | 0 |"), std::string::npos) << coll;  // median of 0.606 and 0.612
  EXPECT_EQ(md.find("FAILED: wrong results"), std::string::npos);
  const std::string paths = section(md, "## Transport path");
  EXPECT_NE(paths.find("| " + kN2Tcp + " | node0 | transport=tcp addr=10.77.0.1:41230 iface=eth0 "
                       "link_gbps=1 |"),
            std::string::npos) << paths;
  EXPECT_NE(paths.find("transport=none (1 rank)"), std::string::npos) << paths;
}

TEST(Report, WrongElementsFlaggedAtTheTop) {
  TempDir dir;
  write_report(make_run(dir, standard_sweep(1, 3).jsonl()), no_plots());
  const std::string md = read_file(dir.path() + "/report.md");
  const size_t flag = md.find("**FAILED: wrong results.** collectives/n4/tcp/none repeat 1: 3 wrong "
                              "elements at 4K (in-place)");
  ASSERT_NE(flag, std::string::npos) << md;
  EXPECT_LT(flag, md.find("## Definitions"));
}

TEST(Report, LastRecordOfAPointRepeatWins) {
  Sweep s = standard_sweep();
  // A failed first attempt of repeat 2 before the ok one (a resumed sweep re-ran it)...
  json failed = s.records[4];
  failed["status"] = "failed";
  failed["error"] = "connection reset by peer";
  failed.erase("train");
  s.records.insert(s.records.begin() + 1, failed);
  // ...and a re-run of repeat 3 appended at the end, at half the throughput.
  json rerun = s.records[6];
  ASSERT_EQ(rerun["point"], kN2Tcp);
  ASSERT_EQ(rerun["repeat"], 3);
  rerun["train"]["summary"]["total_img_s"]["mean"] = 90.0;
  s.records.push_back(rerun);

  TempDir dir;
  write_report(make_run(dir, s.jsonl()), no_plots());
  const Csv csv(read_file(dir.path() + "/summary.csv"));
  EXPECT_EQ(csv.at(kN2Tcp, "repeats_ok"), "3");
  EXPECT_EQ(csv.at(kN2Tcp, "repeats_failed"), "0");
  EXPECT_EQ(csv.at(kN2Tcp, "efficiency_mean"), "0.7500");  // (0.9 + 0.9 + 0.45) / 3
  EXPECT_EQ(read_file(dir.path() + "/report.md").find("connection reset"), std::string::npos);
}

TEST(Report, TruncatedLastLineIsIgnoredWithAWarning) {
  const std::string full = standard_sweep().jsonl();
  TempDir ref, dir;
  write_report(make_run(ref, full), no_plots());
  const std::string partial = standard_sweep().records[1].dump().substr(0, 40);
  ::testing::internal::CaptureStderr();
  write_report(make_run(dir, full + partial), no_plots());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("raw.jsonl line 20 is incomplete"), std::string::npos) << err;
  EXPECT_EQ(read_file(dir.path() + "/summary.csv"), read_file(ref.path() + "/summary.csv"));
  EXPECT_EQ(read_file(dir.path() + "/report.md"), read_file(ref.path() + "/report.md"));
}

TEST(Report, BadMiddleLineIsAnErrorNamingTheLine) {
  std::string text = standard_sweep().jsonl();
  size_t third = 0;
  for (int i = 0; i < 2; ++i) third = text.find('\n', third) + 1;
  text.insert(third, "{\"schema\": 1, \"point\": \n");
  TempDir dir;
  try {
    write_report(make_run(dir, text), no_plots());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("raw.jsonl line 3 is not valid JSON"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(dir.path() + "/report.md"));
}

// A line that is JSON but not a record (wrong type, missing fields, another schema) is an error
// naming its line and field: a results directory is untrusted, and a report must not quietly
// leave records out (tests/report_untrusted_test.cc checks each field).
TEST(Report, RecordOfTheWrongTypeIsAnErrorNamingItsLine) {
  const std::string full = standard_sweep().jsonl();
  for (const auto& [bad, expected] : std::vector<std::pair<std::string, std::string>>{
           {"[\"not\", \"a record\"]", "raw.jsonl line 3 is not a JSON object"},
           {"{\"schema\": 1, \"point\": 7}", "raw.jsonl line 3: \"point\" is missing or not a string"}}) {
    std::string text = full;
    size_t third = 0;
    for (int i = 0; i < 2; ++i) third = text.find('\n', third) + 1;
    text.insert(third, bad + "\n");
    TempDir dir;
    try {
      write_report(make_run(dir, text), no_plots());
      ADD_FAILURE() << bad << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(dir.path() + "/report.md"));
  }
}

// "Where the time goes" gains a CPUs-busy column when the runs measured it, and reports of older
// runs stay as they were.
TEST(Report, CpusBusyColumnOnlyWhenTheRunsMeasuredIt) {
  Sweep s = standard_sweep();
  TempDir plain, measured;
  write_report(make_run(plain, s.jsonl()), no_plots());
  EXPECT_EQ(read_file(plain.path() + "/report.md").find("CPUs busy"), std::string::npos);
  for (auto& r : s.records)
    if (r.contains("train")) r["train"]["summary"]["cpus_busy_per_rank"] = r["nodes"] == 1 ? 1.0 : 1.25;
  write_report(make_run(measured, s.jsonl()), no_plots());
  const std::string md = read_file(measured.path() + "/report.md");
  EXPECT_NE(md.find("| hidden % | CPUs busy |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1.25 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1.00 |"), std::string::npos) << md;
}

// Real data (issue 42): "Where the time goes" gains the input stall and the pipeline's CPUs
// when some point trained on real data, "-" for the synthetic ones.
TEST(Report, InputStallColumnsOnlyWhenARunHadAnInputPipeline) {
  Sweep s = standard_sweep();
  TempDir plain, real;
  write_report(make_run(plain, s.jsonl()), no_plots());
  EXPECT_EQ(read_file(plain.path() + "/report.md").find("input stall"), std::string::npos);
  for (auto& r : s.records)
    if (r.contains("train") && r["nodes"] == 2)
      r["train"]["input"] = {{"stall_s_per_step", {{"mean_over_ranks", r["repeat"] == 1 ? 0.0125 : 0.0375}, {"max_over_ranks", 0.05}}},
                             {"pipeline_cpus_per_rank", 0.75}};
  write_report(make_run(real, s.jsonl()), no_plots());
  const std::string md = read_file(real.path() + "/report.md");
  EXPECT_NE(md.find("| hidden % | input stall s | input CPUs |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 0.0292 | 0.75 |"), std::string::npos) << md;  // the mean over the point's 3 repeats
  EXPECT_NE(md.find("| - | - |"), std::string::npos) << md;          // a point on synthetic data
  s.records.front()["train"]["input"] = {{"pipeline_cpus_per_rank", -1}};
  TempDir bad;
  EXPECT_THROW(write_report(make_run(bad, s.jsonl()), no_plots()), Error);
}

// A precision axis (issue 39): bf16 points are a configuration of their own, with their own
// table, N=1 baseline and efficiency; summary.csv gains a precision column only then.
TEST(Report, PrecisionIsAConfigurationOfItsOwn) {
  Sweep s = standard_sweep();
  TempDir plain;
  write_report(make_run(plain, s.jsonl()), no_plots());
  EXPECT_EQ(read_file(plain.path() + "/summary.csv").find("precision"), std::string::npos);
  const size_t n = s.records.size();
  for (size_t i = 0; i < n; ++i) {
    json r = s.records[i];
    if (r["kind"] != "train" || r["status"] != "ok") continue;
    r["precision"] = "bf16";
    r["point"] = std::string(r["point"]).replace(std::string("train/lenet/b32").size(), 0, "/bf16");
    r["train"]["summary"]["total_img_s"]["mean"] = 2 * r["train"]["summary"]["total_img_s"]["mean"].get<double>();
    s.records.push_back(r);
  }
  TempDir dir;
  write_report(make_run(dir, s.jsonl()), no_plots());
  const std::string md = read_file(dir.path() + "/report.md");
  EXPECT_NE(md.find("batch 32 per rank, default image size, bf16"), std::string::npos) << md;
  EXPECT_NE(md.find("batch 32 per rank, default image size\n"), std::string::npos) << md;
  const Csv csv(read_file(dir.path() + "/summary.csv"));
  EXPECT_EQ(csv.at("train/lenet/b32/bf16/n2/tcp/none", "precision"), "bf16");
  EXPECT_EQ(csv.at(kN2Tcp, "precision"), "fp32");
  // Each against its own N=1 point: doubled throughput everywhere, the same efficiency.
  EXPECT_EQ(csv.at("train/lenet/b32/bf16/n2/tcp/none", "efficiency_mean"), csv.at(kN2Tcp, "efficiency_mean"));
}

// --compression points are a configuration of their own whose efficiency is against the same
// N=1 point as uncompressed ones: one rank sends nothing.
TEST(Report, CompressedPointsShareTheirN1Baseline) {
  Sweep s = standard_sweep();
  const size_t n = s.records.size();
  for (size_t i = 0; i < n; ++i) {
    json r = s.records[i];
    if (r["kind"] != "train" || r["status"] != "ok" || r["nodes"] == 1) continue;
    r["compression"] = "fp16";
    r["point"] = std::string(r["point"]).replace(std::string("train/lenet/b32").size(), 0, "/wire-fp16");
    s.records.push_back(r);
  }
  TempDir dir;
  write_report(make_run(dir, s.jsonl()), no_plots());
  const std::string md = read_file(dir.path() + "/report.md");
  EXPECT_NE(md.find("batch 32 per rank, default image size, --compression fp16"), std::string::npos) << md;
  const Csv csv(read_file(dir.path() + "/summary.csv"));
  EXPECT_EQ(csv.at("train/lenet/b32/wire-fp16/n2/tcp/none", "compression"), "fp16");
  EXPECT_EQ(csv.at("train/lenet/b32/wire-fp16/n2/tcp/none", "efficiency_mean"), csv.at(kN2Tcp, "efficiency_mean"));
}

// Axes declared only in runner/record/axes.cc (issue 40): fusion_mb points are a configuration of
// their own, sorted by size (4 before 16), sharing the N=1 baseline (a communication axis), with a
// fusion_mb column; a hostile value in a record is refused naming the field.
TEST(Report, FusionIsAConfigurationSortedBySize) {
  Sweep s = standard_sweep();
  const size_t n = s.records.size();
  for (const char* mb : {"16", "4"}) {
    for (size_t i = 0; i < n; ++i) {
      json r = s.records[i];
      if (r["kind"] != "train" || r["status"] != "ok" || r["nodes"] == 1) continue;
      r["fusion_mb"] = std::stod(mb);
      r["point"] = std::string(r["point"]).replace(std::string("train/lenet/b32").size(), 0, std::string("/fusion") + mb);
      s.records.push_back(r);
    }
  }
  TempDir dir;
  write_report(make_run(dir, s.jsonl()), no_plots());
  const std::string md = read_file(dir.path() + "/report.md");
  const size_t four = md.find("batch 32 per rank, default image size, --fusion-mb 4\n");
  const size_t sixteen = md.find("batch 32 per rank, default image size, --fusion-mb 16\n");
  ASSERT_NE(four, std::string::npos) << md;
  ASSERT_NE(sixteen, std::string::npos) << md;
  EXPECT_LT(four, sixteen);
  const Csv csv(read_file(dir.path() + "/summary.csv"));
  EXPECT_EQ(csv.at("train/lenet/b32/fusion4/n2/tcp/none", "fusion_mb"), "4");
  EXPECT_EQ(csv.at(kN2Tcp, "fusion_mb"), "25");
  EXPECT_EQ(csv.at("train/lenet/b32/fusion4/n2/tcp/none", "efficiency_mean"), csv.at(kN2Tcp, "efficiency_mean"));
  for (const json& bad : {json(-1), json("4"), json(1e9)}) {
    Sweep h = standard_sweep();
    for (auto& r : h.records)
      if (r["kind"] == "train") r["fusion_mb"] = bad;
    TempDir d;
    try {
      write_report(make_run(d, h.jsonl()), no_plots());
      ADD_FAILURE() << "fusion_mb " << bad.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("\"fusion_mb\""), std::string::npos) << e.what();
    }
  }
}

// Found by fuzz/raw_jsonl_fuzz: a number JSON cannot hold (1e999) threw past the reader.
TEST(Report, NumberOutOfRangeIsInvalidJsonNamingItsLine) {
  const std::string full = standard_sweep().jsonl();
  TempDir dir;
  try {
    write_report(make_run(dir, "{\"schema\": 1e999}\n" + full), no_plots());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("raw.jsonl line 1 is not valid JSON"), std::string::npos) << e.what();
  }
  TempDir last;  // as the last line, it is what an interrupted sweep leaves: ignored
  ::testing::internal::CaptureStderr();
  write_report(make_run(last, full + "{\"schema\": 1e999}\n"), no_plots());
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("is incomplete"), std::string::npos) << err;
}

TEST(Report, MissingRawJsonlSaysWhatToCheck) {
  TempDir dir;
  try {
    write_report(dir.path(), no_plots());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("raw.jsonl not found: is " + dir.path() +
                                         " a sweep's results directory?"),
              std::string::npos) << e.what();
  }
}

TEST(Report, SameRawJsonlGivesTheSameBytes) { expect_same_bytes(standard_sweep().jsonl()); }

TEST(Report, PlotsDrawnWithGnuplot) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
  TempDir dir;
  write_report(make_run(dir, standard_sweep().jsonl()));
  for (const char* name : {"lenet-throughput", "lenet-efficiency", "busbw", "time-breakdown"}) {
    const std::string base = dir.path() + "/plots/" + name;
    EXPECT_NE(read_file(base + ".svg").find("<svg"), std::string::npos) << name;
    EXPECT_TRUE(fs::exists(base + ".gp")) << name;
    EXPECT_TRUE(fs::exists(base + ".dat")) << name;
  }
  EXPECT_FALSE(fs::exists(dir.path() + "/plots/mobilenet_v1-throughput.svg"));  // no data
  const std::string md = read_file(dir.path() + "/report.md");
  EXPECT_NE(md.find("](plots/lenet-throughput.svg)"), std::string::npos) << md;
  EXPECT_NE(md.find("](plots/busbw.svg)"), std::string::npos) << md;
  EXPECT_EQ(md.find("Plots skipped"), std::string::npos) << md;
}

TEST(Report, PlotsSkippedWithANoteWithoutGnuplot) {
  const std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", "/nonexistent", 1);
  TempDir dir;
  write_report(make_run(dir, standard_sweep().jsonl()));
  setenv("PATH", saved.c_str(), 1);
  const std::string md = read_file(dir.path() + "/report.md");
  EXPECT_NE(md.find("gnuplot not found (apt-get install gnuplot-nox)"), std::string::npos) << md;
  EXPECT_EQ(md.find("](plots/"), std::string::npos) << md;
  EXPECT_FALSE(fs::exists(dir.path() + "/plots"));
}

// ---------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------
// compare

Compared compare(double b_scale, double threshold) {
  return compare(standard_sweep().jsonl(), standard_sweep(b_scale).jsonl(), threshold);
}

TEST(Compare, IdenticalRunsHaveNoRegression) {
  const Compared c = compare(1.0, 0.05);
  EXPECT_EQ(c.rc, 0) << c.out;
  EXPECT_NE(c.out.find("0 regressions beyond noise"), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find("REGRESSION"), std::string::npos) << c.out;
}

TEST(Compare, TwentyPercentSlowerIsARegression) {
  const Compared c = compare(0.8, 0.05);
  EXPECT_EQ(c.rc, 1) << c.out;
  EXPECT_NE(c.out.find("-20.0"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("6 regressions beyond noise"), std::string::npos) << c.out;  // 5 train + busbw
}

TEST(Compare, TwoPercentSlowerIsWithinTheThreshold) {
  const Compared c = compare(0.98, 0.05);
  EXPECT_EQ(c.rc, 0) << c.out;
  EXPECT_NE(c.out.find("0 regressions beyond noise"), std::string::npos) << c.out;
}

TEST(Compare, APointThatFailsInBFailsTheGate) {
  const std::string a = standard_sweep().jsonl();
  const std::string b = without_result(standard_sweep(), kN2Tcp, "failed", "rank 1 timed out").jsonl();
  const auto [rc, out] = compare(a, b);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("0 regressions beyond noise"), std::string::npos) << out;
  EXPECT_NE(out.find("1 point with a result in A failed in B"), std::string::npos) << out;
  EXPECT_EQ(compare(a, b, 0.05, /*fail_on_regression=*/false).rc, 0);
}

TEST(Compare, RegressionWithinTheNoiseIsNotFlagged) {
  // n4/mpi varies ±3% over repeats (CI ±7%), busbw ±0.5% over 2 (CI ±6%): a 6% drop is noise
  // there, not at the 4 other train points.
  const Compared c = compare(0.94, 0.05);
  EXPECT_NE(c.out.find("4 regressions beyond noise"), std::string::npos) << c.out;
  std::stringstream lines(c.out);
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("train/lenet/b32/n4/mpi/none", 0) == 0) {
      EXPECT_NE(l.find(" ok"), std::string::npos) << l;
    }
  }
}

}  // namespace
}  // namespace ringbench
