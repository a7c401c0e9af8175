// `ringbench report` and `ringbench compare` on synthetic raw.jsonl files with known numbers:
// scaling efficiency, transport ratios, stragglers, failures, determinism, and the exit code.
#include "runner/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/errors.h"

namespace ringbench {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/report_test.XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

bool have_gnuplot() {
  std::stringstream dirs(std::getenv("PATH") ? std::getenv("PATH") : "");
  for (std::string d; std::getline(dirs, d, ':');)
    if (access((d + "/gnuplot").c_str(), X_OK) == 0) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// A synthetic sweep: lenet at N=1 (100 img/s), N=2 and N=4 over tcp and mpi, 3 repeats each;
// a failed mobilenet point, a skipped nccl point, a collectives point; rank 3 of the N=4 tcp
// point straggles in repeat 2.

struct Sweep {
  double scale = 1;  // multiplies every img/s and busbw (for compare)
  int seq = 0;
  std::vector<json> records;

  json common(const std::string& point, int repeat, const std::string& kind, int nodes,
              const std::string& transport) {
    char started[32];
    std::snprintf(started, sizeof started, "2026-11-21T10:%02d:%02dZ", seq / 60, seq % 60);
    return {{"schema", 1}, {"run_id", "test-20261121-101500"}, {"sweep", "test"},
            {"seq", seq++}, {"points_total", 25}, {"point", point}, {"repeat", repeat},
            {"kind", kind}, {"nodes", nodes}, {"transport", transport}, {"profile", "none"},
            {"cluster", {{"type", "emulated"}, {"link", "1gbit"}, {"cpus_per_node", 1},
                         {"note", "nodes are network namespaces sharing 2 cores"}}},
            {"status", "ok"}, {"error", ""}, {"started_at", started}, {"wall_s", 12.5},
            {"command", {"ringbench", kind}}};
  }

  static json hosts(int nodes, const std::string& transport) {
    json h = json::array();
    for (int r = 0; r < nodes; ++r) {
      json path = {{"transport", nodes == 1 ? "none (1 rank)" : transport}};
      if (nodes > 1 && transport == "tcp")
        path = {{"transport", "tcp"},
                {"addr", "10.77.0." + std::to_string(r + 1) + ":4123" + std::to_string(r)},
                {"iface", "eth0"}, {"link_gbps", "1"}};
      h.push_back({{"rank", r}, {"host", "node" + std::to_string(r)}, {"path", path}});
    }
    return h;
  }

  void train(int nodes, const std::string& transport, const std::vector<double>& totals,
             int slow_rank = -1, int slow_repeat = -1) {
    const std::string point = "train/lenet/b32/n" + std::to_string(nodes) + "/" + transport + "/none";
    for (int rep = 1; rep <= int(totals.size()); ++rep) {
      const double total = totals[size_t(rep - 1)] * scale, step = 32.0 * nodes / total;
      const double exposed = nodes > 1 ? 0.3 * step : 0, allreduce = nodes > 1 ? 0.5 * step : 0;
      json ranks = json::array();
      for (int r = 0; r < nodes; ++r) {
        const double s = r == slow_rank && rep == slow_repeat ? 1.5 * step : step;
        ranks.push_back({{"rank", r}, {"step_s", {s, s, s * 1.01, s * 0.99, s}}});
      }
      const auto over_ranks = [](double v) {
        return json{{"mean_over_ranks", v}, {"max_over_ranks", v}};
      };
      json rec = common(point, rep, "train", nodes, transport);
      rec.update({{"model", "lenet"}, {"batch", 32}, {"image_size", 0}});
      rec["train"] = {
          {"summary",
           {{"total_img_s", {{"mean", total}, {"ci95", 1.0}}},
            {"img_s_per_rank", {{"mean", total / nodes}, {"ci95", 0.5}}},
            {"step_s", over_ranks(step)}, {"compute_s", over_ranks(0.95 * step - exposed)},
            {"exposed_s", over_ranks(exposed)}, {"allreduce_s", over_ranks(allreduce)},
            {"optimizer_s", over_ranks(0.05 * step)},
            {"hidden_fraction", nodes > 1 ? json(1 - exposed / allreduce) : json(nullptr)}}},
          {"ranks", ranks},
          {"meta", {{"params", 1663370}, {"backend", "dnnl"}, {"hosts", hosts(nodes, transport)}}}};
      records.push_back(rec);
    }
  }

  void not_run(const std::string& model, int batch, int nodes, const std::string& transport,
               const std::string& status, const std::string& error) {
    const std::string point = "train/" + model + "/b" + std::to_string(batch) + "/n" +
                              std::to_string(nodes) + "/" + transport + "/none";
    json rec = common(point, 1, "train", nodes, transport);
    rec.update({{"model", model}, {"batch", batch}, {"image_size", 0}, {"status", status},
                {"error", error}});
    records.push_back(rec);
  }

  void collectives(int repeats, uint64_t wrong = 0) {
    for (int rep = 1; rep <= repeats; ++rep) {
      json rows = json::array();
      for (const auto& [bytes, busbw] : std::vector<std::pair<uint64_t, double>>{
               {4096, 0.05}, {1 << 20, 0.6}, {64 << 20, 0.9}}) {
        const double b = busbw * scale * (1 + 0.01 * rep), algbw = b * 4 / 6;
        for (bool inplace : {false, true})
          rows.push_back({{"bytes", bytes}, {"count", bytes / 4}, {"dtype", "float"},
                          {"inplace", inplace}, {"algo", bytes < 32768 ? "rd" : "ring"},
                          {"time_us", double(bytes) / algbw / 1e3}, {"algbw_gbps", algbw},
                          {"busbw_gbps", b}, {"p50_us", 1.0}, {"p99_us", 2.0},
                          {"wrong", inplace && bytes == 4096 ? wrong : 0}});
      }
      json rec = common("collectives/n4/tcp/none", rep, "collectives", 4, "tcp");
      rec["collectives"] = {{"rows", rows}, {"meta", {{"impl", "ring"}, {"hosts", hosts(4, "tcp")}}}};
      records.push_back(rec);
    }
  }

  std::string jsonl() const {
    std::string s;
    for (const auto& r : records) s += r.dump() + "\n";
    return s;
  }
};

Sweep standard_sweep(double scale = 1, uint64_t wrong = 0) {
  Sweep s;
  s.scale = scale;
  s.train(1, "none", {100, 100, 100});
  s.train(2, "tcp", {180, 180, 180});
  s.train(2, "mpi", {198, 198, 198});
  s.train(4, "tcp", {320, 320, 320}, 3, 2);
  s.train(4, "mpi", {340, 350, 360});
  s.not_run("mobilenet_v1", 16, 2, "tcp", "failed",
            "rank 1 (10.77.0.2:41234) closed the connection: the process died or was killed");
  s.not_run("lenet", 32, 4, "nccl", "skipped",
            "transport nccl is not in this build (RINGBENCH_WITH_NCCL=OFF)");
  s.collectives(2, wrong);
  return s;
}

std::string make_run(const TempDir& dir, const std::string& jsonl) {
  write_file(dir.path() + "/raw.jsonl", jsonl);
  return dir.path();
}

ReportOptions no_plots() {
  ReportOptions o;
  o.plots = false;
  return o;
}

// summary.csv as rows of cells by point id, plus the column index by name.
struct Csv {
  std::map<std::string, int> column;
  std::map<std::string, std::vector<std::string>> rows;

  explicit Csv(const std::string& text) {
    std::stringstream lines(text);
    std::string line;
    for (bool header = true; std::getline(lines, line); header = false) {
      std::vector<std::string> cells;
      std::stringstream ss(line);
      for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
      if (line.back() == ',') cells.push_back("");
      if (header)
        for (size_t i = 0; i < cells.size(); ++i) column[cells[i]] = int(i);
      else
        rows[cells.at(1)] = cells;
    }
  }
  std::string at(const std::string& point, const std::string& col) const {
    return rows.at(point).at(size_t(column.at(col)));
  }
};

// The part of report.md from `heading` to the next "## " heading.
std::string section(const std::string& md, const std::string& heading) {
  const size_t start = md.find(heading);
  if (start == std::string::npos) return "";
  const size_t end = md.find("\n## ", start + heading.size());
  return md.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

const std::string kN2Tcp = "train/lenet/b32/n2/tcp/none", kN4Tcp = "train/lenet/b32/n4/tcp/none";

TEST(Report, ScalingEfficiencyAndRatiosInSummaryCsv) {
  TempDir dir;
  write_report(make_run(dir, standard_sweep().jsonl()), no_plots());
  const Csv csv(read_file(dir.path() + "/summary.csv"));
  EXPECT_EQ(csv.at(kN2Tcp, "efficiency_mean"), "0.9000");
  EXPECT_EQ(csv.at(kN2Tcp, "total_img_s_median"), "180.00");
  EXPECT_EQ(csv.at(kN2Tcp, "repeats_ok"), "3");
  EXPECT_EQ(csv.at(kN2Tcp, "ratio_vs_tcp_mean"), "");
  EXPECT_EQ(csv.at(kN4Tcp, "efficiency_mean"), "0.8000");
  EXPECT_EQ(csv.at("train/lenet/b32/n1/none/none", "efficiency_mean"), "1.0000");
  EXPECT_EQ(csv.at("train/lenet/b32/n2/mpi/none", "ratio_vs_tcp_mean"), "1.1000");
  EXPECT_NEAR(std::stod(csv.at("train/lenet/b32/n4/mpi/none", "ratio_vs_tcp_mean")), 1.09375, 1e-4);
  EXPECT_GT(std::stod(csv.at("train/lenet/b32/n4/mpi/none", "ratio_vs_tcp_ci95")), 0);
  EXPECT_EQ(csv.at(kN2Tcp, "hidden_fraction"), "0.4000");
  EXPECT_EQ(csv.at("train/mobilenet_v1/b16/n2/tcp/none", "repeats_failed"), "1");
  EXPECT_EQ(csv.at("train/mobilenet_v1/b16/n2/tcp/none", "total_img_s_median"), "");
  EXPECT_EQ(csv.at("collectives/n4/tcp/none", "busbw_at_bytes"), std::to_string(64 << 20));
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
  EXPECT_NE(failures.find("- `train/mobilenet_v1/b16/n2/tcp/none` repeat 1: failed: rank 1 "
                          "(10.77.0.2:41234) closed the connection: the process died or was killed"),
            std::string::npos) << failures;
  EXPECT_NE(failures.find("- `train/lenet/b32/n4/nccl/none` repeat 1: skipped: transport nccl is "
                          "not in this build (RINGBENCH_WITH_NCCL=OFF)"),
            std::string::npos) << failures;
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
  testing::internal::CaptureStderr();
  write_report(make_run(dir, full + partial), no_plots());
  const std::string err = testing::internal::GetCapturedStderr();
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

std::vector<std::string> output_files(const std::string& dir) {
  std::vector<std::string> files = {"report.md", "summary.csv"};
  if (fs::exists(dir + "/plots"))
    for (const auto& e : fs::directory_iterator(dir + "/plots"))
      files.push_back("plots/" + e.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

void remove_outputs(const std::string& dir) {
  fs::remove(dir + "/report.md");
  fs::remove(dir + "/summary.csv");
  fs::remove_all(dir + "/plots");
}

TEST(Report, SameRawJsonlGivesTheSameBytes) {
  const std::string raw = standard_sweep().jsonl();
  TempDir a, b;
  write_report(make_run(a, raw));
  const auto files = output_files(a.path());
  std::map<std::string, std::string> first;
  for (const auto& f : files) first[f] = read_file(a.path() + "/" + f);
  remove_outputs(a.path());
  write_report(a.path());
  write_report(make_run(b, raw));  // another directory: no absolute path may leak in
  EXPECT_EQ(output_files(a.path()), files);
  EXPECT_EQ(output_files(b.path()), files);
  for (const auto& f : files) {
    EXPECT_EQ(read_file(a.path() + "/" + f), first[f]) << f;
    EXPECT_EQ(read_file(b.path() + "/" + f), first[f]) << f;
  }
}

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
// compare

struct Compared {
  int rc;
  std::string out;
};

Compared compare(double b_scale, double threshold) {
  TempDir a, b;
  make_run(a, standard_sweep().jsonl());
  make_run(b, standard_sweep(b_scale).jsonl());
  CompareOptions opts;
  opts.threshold = threshold;
  opts.fail_on_regression = true;
  testing::internal::CaptureStdout();
  const int rc = compare_runs(a.path(), b.path(), opts);
  return {rc, testing::internal::GetCapturedStdout()};
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
  TempDir a, b;
  make_run(a, standard_sweep().jsonl());
  Sweep s = standard_sweep();
  for (auto& r : s.records)
    if (r["point"] == kN2Tcp) {
      r["status"] = "failed";
      r["error"] = "rank 1 timed out";
      r.erase("train");
    }
  make_run(b, s.jsonl());
  CompareOptions opts;
  opts.fail_on_regression = true;
  testing::internal::CaptureStdout();
  const int rc = compare_runs(a.path(), b.path(), opts);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("0 regressions beyond noise"), std::string::npos) << out;
  EXPECT_NE(out.find("1 point with a result in A failed in B"), std::string::npos) << out;
  opts.fail_on_regression = false;
  testing::internal::CaptureStdout();
  EXPECT_EQ(compare_runs(a.path(), b.path(), opts), 0);
  testing::internal::GetCapturedStdout();
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
