// `ringbench report` and `ringbench compare` on synthetic raw.jsonl files with known numbers:
// scaling efficiency, transport ratios, stragglers, failures, determinism, and the exit code.
#include "runner/report/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/errors.h"
#include "tests/run_command.h"

namespace ringbench {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using testing::has_all;

// A directory of its own (under run_command.h's per-process one), removed with what it holds.
class TempDir {
 public:
  TempDir() : path_(testing::temp_path("report")) { fs::create_directories(path_); }
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

// Every record of `point` in `s` made one that ran without a result: `status` and `error`.
Sweep without_result(Sweep s, const std::string& point, const std::string& status, const std::string& error) {
  for (auto& r : s.records)
    if (r["point"] == point) {
      r["status"] = status;
      r["error"] = error;
      r.erase("train");
    }
  return s;
}

struct Compared {
  int rc;
  std::string out;
};

// `ringbench compare` of a run of `a_raw` against one of `b_raw`, with --fail-on-regression unless
// `fail_on_regression` is false: its exit code and what it printed.
Compared compare(const std::string& a_raw, const std::string& b_raw, double threshold = 0.05,
                 bool fail_on_regression = true) {
  TempDir a, b;
  make_run(a, a_raw);
  make_run(b, b_raw);
  CompareOptions opts;
  opts.threshold = threshold;
  opts.fail_on_regression = fail_on_regression;
  ::testing::internal::CaptureStdout();
  const int rc = compare_runs(a.path(), b.path(), opts);
  return {rc, ::testing::internal::GetCapturedStdout()};
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

// One cell of summary.csv and the text it must hold.
struct Cell {
  std::string point, column, value;
};

void expect_cells(const Csv& csv, const std::vector<Cell>& cells) {
  for (const Cell& c : cells) EXPECT_EQ(csv.at(c.point, c.column), c.value) << c.point << ", " << c.column;
}

const std::string kN2Tcp = "train/lenet/b32/n2/tcp/none", kN4Tcp = "train/lenet/b32/n4/tcp/none";

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

// A line that is JSON but not a record (wrong type, missing fields, another schema) is named once
// and left out; the report of the other records is what it would be without it.
TEST(Report, RecordOfTheWrongTypeIsLeftOutNamingItsLine) {
  const std::string full = standard_sweep().jsonl();
  TempDir ref, dir;
  write_report(make_run(ref, full), no_plots());
  std::string text = full;
  size_t third = 0;
  for (int i = 0; i < 2; ++i) third = text.find('\n', third) + 1;
  text.insert(third, "[\"not\", \"a record\"]\n{\"schema\": 1, \"point\": 7}\n");
  for (int run = 0; run < 2; ++run) {  // and again: later reports still work
    ::testing::internal::CaptureStderr();
    write_report(make_run(dir, text), no_plots());
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("raw.jsonl line 3 is not a JSON object: record left out"), std::string::npos) << err;
    EXPECT_NE(err.find("raw.jsonl line 4: \"point\" is missing or not a string: record left out"), std::string::npos)
        << err;
    EXPECT_EQ(read_file(dir.path() + "/summary.csv"), read_file(ref.path() + "/summary.csv"));
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

// The report of `raw` written again in the same directory, and in another one (no absolute path
// may leak in), has the same files, byte for byte.
void expect_same_bytes(const std::string& raw) {
  TempDir a, b;
  write_report(make_run(a, raw));
  const auto files = output_files(a.path());
  std::map<std::string, std::string> first;
  for (const auto& f : files) first[f] = read_file(a.path() + "/" + f);
  remove_outputs(a.path());
  write_report(a.path());
  write_report(make_run(b, raw));
  EXPECT_EQ(output_files(a.path()), files);
  EXPECT_EQ(output_files(b.path()), files);
  for (const auto& f : files) {
    EXPECT_EQ(read_file(a.path() + "/" + f), first[f]) << f;
    EXPECT_EQ(read_file(b.path() + "/" + f), first[f]) << f;
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
// vGPU profiles: lenet on T4-4C fits (peak 412.5 of 4096 MiB), resnet50 on P40-1Q does not; lenet
// shared by 1 and 4 VMs of T4-4C under best_effort and fixed_share, and of T4-16C (one vGPU per
// GPU: the 4 VMs points are skipped). Two repeats each, the second 1% faster.

const std::string kEmulated = "no NVIDIA GPU here: the profile is emulated";

json vgpu_meta(double framebuffer) {
  return {{"mode", "emulated"}, {"message", kEmulated}, {"framebuffer_mib", framebuffer},
          {"detected", "none"}};
}

void train_profile(Sweep& s, const std::string& profile, const std::vector<double>& totals,
                   double peak_mib, double cap_mib) {
  const std::string point = "train/lenet/b32/n1/none/" + profile;
  for (int rep = 1; rep <= int(totals.size()); ++rep) {
    const double total = totals[size_t(rep - 1)], step = 32.0 / total;
    const auto over_ranks = [](double v) {
      return json{{"mean_over_ranks", v}, {"max_over_ranks", v}};
    };
    json rec = s.common(point, rep, "train", 1, "none");
    rec.update({{"model", "lenet"}, {"batch", 32}, {"image_size", 0}, {"profile", profile}});
    rec["train"] = {
        {"summary",
         {{"total_img_s", {{"mean", total}, {"ci95", 1.0}}},
          {"img_s_per_rank", {{"mean", total}, {"ci95", 1.0}}}, {"step_s", over_ranks(step)},
          {"compute_s", over_ranks(0.95 * step)}, {"exposed_s", over_ranks(0)},
          {"allreduce_s", over_ranks(0)}, {"optimizer_s", over_ranks(0.05 * step)},
          {"hidden_fraction", nullptr},
          {"device_memory", {{"peak_mib", peak_mib + rep - 1}, {"cap_mib", cap_mib}}}}},
        {"ranks", json::array({{{"rank", 0}, {"step_s", {step, step}}}})},
        {"meta", {{"params", 61706}, {"backend", "dnnl"}, {"hosts", Sweep::hosts(1, "none")},
                  {"vgpu", vgpu_meta(cap_mib)}}}};
    s.records.push_back(rec);
  }
}

void train_does_not_fit(Sweep& s, int repeats) {
  const std::string message =
      "out of device memory: onednn tensor of 12.5 MiB with 1019.0 MiB of the 1024 MiB in use";
  for (int rep = 1; rep <= repeats; ++rep) {
    json rec = s.common("train/resnet50/b64/n1/none/P40-1Q", rep, "train", 1, "none");
    rec.update({{"model", "resnet50"}, {"batch", 64}, {"image_size", 0}, {"profile", "P40-1Q"},
                {"status", "does_not_fit"}, {"error", message}});
    rec["does_not_fit"] = {{"profile", "P40-1Q"}, {"framebuffer_mib", 1024.0},
                           {"requested_mib", 12.5}, {"in_use_mib", 1019.0},
                           {"needed_at_least_mib", 1031.5}, {"allocation", "onednn tensor"},
                           {"message", message}};
    rec["vgpu"] = vgpu_meta(1024);
    s.records.push_back(rec);
  }
}

// `per_vm` img/s per VM in repeat 1; utilization per VM and of the device (null: not measured).
void share(Sweep& s, const std::string& profile, int max_instances, const std::string& policy,
           int vms, int repeats, double per_vm, double util, json util_total) {
  const std::string point =
      "share/lenet/b32/" + profile + "/" + policy + "/vms" + std::to_string(vms);
  for (int rep = 1; rep <= repeats; ++rep) {
    json rec = s.common(point, rep, "share", 1, "none");
    rec.update({{"model", "lenet"}, {"batch", 32}, {"image_size", 0}, {"profile", profile},
                {"policy", policy}, {"vms", vms}, {"slice_ms", 2.0}});
    if (vms > max_instances) {
      rec.update({{"status", "skipped"},
                  {"error", profile + " hosts at most " + std::to_string(max_instances) +
                                " vGPU(s) per GPU"}});
      s.records.push_back(rec);
      continue;
    }
    const double img = per_vm * (1 + 0.01 * (rep - 1)), step = 32 / img;
    json per = json::array();
    for (int vm = 0; vm < vms; ++vm)
      per.push_back({{"vm", vm}, {"img_s", {{"mean", img}, {"ci95", 0.5}}}, {"step_s", step},
                     {"device_util", util}, {"device_held_s_per_step", util * step},
                     {"device_wait_s_per_step", (1 - util) * step},
                     {"device_memory_peak_mib", 400.0 + vm}});
    rec["share"] = {
        {"summary",
         {{"total_img_s", {{"mean", img * vms}, {"ci95", 1.0}}},
          {"img_s_per_vm", {{"mean", img}, {"min", img}, {"max", img}}}, {"step_s", step},
          {"device_util_per_vm", util}, {"device_util_total", util_total},
          {"common_window_s", 3.5}}},
        {"vms", per},
        {"meta", {{"backend", "dnnl"}, {"threads_per_rank", 1}, {"steps", 20}, {"warmup", 5},
                  {"gpu", "T4"}, {"framebuffer_mib", profile == "T4-4C" ? 4096 : 16384},
                  {"max_instances", max_instances}, {"slice_ms", 2.0},
                  {"vgpu", vgpu_meta(profile == "T4-4C" ? 4096 : 16384)}}}};
    s.records.push_back(rec);
  }
}

Sweep vgpu_sweep(double share_scale = 1) {
  Sweep s;
  s.train(1, "none", {100, 100});
  train_profile(s, "T4-4C", {98, 99}, 412.5, 4096);
  train_does_not_fit(s, 2);
  const std::vector<std::pair<std::string, int>> profiles = {{"T4-4C", 4}, {"T4-16C", 1}};
  for (const auto& [profile, max] : profiles) {
    const bool quarter = profile == "T4-4C";
    share(s, profile, max, "best_effort", 1, 2, 100 * share_scale, 0.95, 0.95);
    share(s, profile, max, "best_effort", 4, 2, 24 * share_scale, 0.24, 0.97);
    share(s, profile, max, "fixed_share", 1, 2, (quarter ? 25 : 100) * share_scale,
          quarter ? 0.25 : 0.95, quarter ? 0.25 : 0.95);
    share(s, profile, max, "fixed_share", 4, 2, 24 * share_scale, 0.24, nullptr);
  }
  return s;
}

const std::string kShare = "share/lenet/b32/T4-4C/";

TEST(ReportVgpu, HeaderCountsDoesNotFitApartFromFailures) {
  TempDir dir;
  write_report(make_run(dir, vgpu_sweep().jsonl()), no_plots());
  const std::string md = read_file(dir.path() + "/report.md");
  EXPECT_NE(md.find("Points: 8 ok, 1 does not fit, 0 failed, 2 skipped (repeats: 16 ok, 2 does not "
                    "fit, 0 failed, 4 skipped)."),
            std::string::npos) << md;
  // The training table says so instead of "failed".
  EXPECT_NE(md.find("| 1 | none | P40-1Q | does not fit |"), std::string::npos) << md;
  const std::string failures = section(md, "## Failed and skipped");
  EXPECT_NE(failures.find("- `share/lenet/b32/T4-16C/best_effort/vms4` repeat 1: skipped: "
                          "T4-16C hosts at most 1 vGPU(s) per GPU"),
            std::string::npos) << failures;
  EXPECT_EQ(failures.find("does_not_fit:"), std::string::npos) << failures;
  const size_t misfits =
      failures.find("Did not fit the profile's framebuffer (results, not failures");
  ASSERT_NE(misfits, std::string::npos) << failures;
  EXPECT_GT(failures.find("- `train/resnet50/b64/n1/none/P40-1Q` repeat 2: out of device memory"),
            misfits) << failures;
}

TEST(ReportVgpu, ProfilesAndMemoryTables) {
  TempDir dir;
  write_report(make_run(dir, vgpu_sweep().jsonl()), no_plots());
  const std::string md = read_file(dir.path() + "/report.md");
  const std::string vgpu = section(md, "## vGPU profiles");
  ASSERT_FALSE(vgpu.empty()) << md;
  EXPECT_LT(md.find("## Stragglers"), md.find("## vGPU profiles"));
  EXPECT_LT(md.find("## vGPU profiles"), md.find("## Transport path"));
  // In the sweep's order, not alphabetical; what the catalog numbers the records lack is "-".
  const size_t t4 = vgpu.find("| T4-4C | T4 | 4096 | 4 | emulated: " + kEmulated + " |");
  const size_t p40 = vgpu.find("| P40-1Q | P40 | 1024 | - | emulated: " + kEmulated + " |");
  const size_t t16 = vgpu.find("| T4-16C | T4 | 16384 | 1 | emulated: " + kEmulated + " |");
  ASSERT_NE(t4, std::string::npos) << vgpu;
  ASSERT_NE(p40, std::string::npos) << vgpu;
  ASSERT_NE(t16, std::string::npos) << vgpu;
  EXPECT_LT(t4, p40);
  EXPECT_LT(p40, t16);
  EXPECT_NE(vgpu.find("Real vGPU: none. Emulated: T4-4C, P40-1Q, T4-16C ("), std::string::npos)
      << vgpu;
  EXPECT_TRUE(has_all(vgpu, {"| lenet b32 | T4-4C | 4096 | 1 | fits: peak 413.5 MiB (10.1% of the framebuffer) | "
                             "98.5 ± 6.4 |",
                             "| resnet50 b64 | P40-1Q | 1024 | 1 | does not fit: needs ≥ 1031.5 MiB (allocation of "
                             "12.5 MiB for onednn tensor with 1019.0 MiB in use) | - |"}));
  // Nothing of the unprofiled training point.
  EXPECT_EQ(vgpu.find("| lenet b32 | none |"), std::string::npos) << vgpu;
}

TEST(ReportVgpu, SharingTableOneVmAgainstFour) {
  TempDir dir;
  write_report(make_run(dir, vgpu_sweep().jsonl()), no_plots());
  const std::string vgpu = section(read_file(dir.path() + "/report.md"), "## vGPU profiles");
  EXPECT_TRUE(has_all(
      vgpu, {"### Sharing one device: lenet, batch 32 per VM, default image size",
             "then 4 VMs of the same profile on one device, slice 2 ms.",
             "| 4 VMs: img/s per VM | 4 VMs: total img/s | 4 VMs: step s | 4 VMs: device util per VM | 4 VMs: "
             "device util total | per-VM img/s, 4 vs 1 |",
             // Per VM 100 (then 101) img/s alone, 24 (24.24) with 4 VMs: 0.24 in both repeats.
             "| T4-4C | best_effort | 100.5 ± 6.4 | 0.3184 | 95.0% | 24.1 ± 1.5 | 96.5 ± 6.1 | 1.3267 | 24.0% | "
             "97.0% | 0.240× ± 0.000 |",
             // fixed_share: a VM alone gets its quarter; the device total was not measured.
             "| T4-4C | fixed_share | 25.1 ± 1.6 | 1.2737 | 25.0% | 24.1 ± 1.5 | 96.5 ± 6.1 | 1.3267 | 24.0% | - | "
             "0.960× ± 0.000 |",
             "| T4-16C | fixed_share | 100.5 ± 6.4 | 0.3184 | 95.0% | skipped |  |  |  |  | - |"}));
  EXPECT_LT(vgpu.find("| T4-4C | best_effort |"), vgpu.find("| T4-4C | fixed_share |"));
  EXPECT_LT(vgpu.find("| T4-4C | fixed_share |"), vgpu.find("| T4-16C | best_effort |"));
  EXPECT_NE(vgpu.find("Under **fixed share**"), std::string::npos) << vgpu;

  const std::string md = read_file(dir.path() + "/report.md");
  const std::string defs = section(md, "## Definitions");
  EXPECT_NE(defs.find("- **device utilization** (per VM)"), std::string::npos) << defs;
  EXPECT_NE(defs.find("- **does not fit**"), std::string::npos) << defs;
  const std::string paths = section(md, "## Transport path");
  EXPECT_NE(paths.find("| " + kShare + "fixed_share/vms4 | n/a | n/a (4 VMs sharing one device, no "
                       "transport) |"),
            std::string::npos) << paths;
}

TEST(ReportVgpu, SummaryCsvAppendsTheVgpuColumns) {
  TempDir dir;
  write_report(make_run(dir, vgpu_sweep().jsonl()), no_plots());
  const std::string text = read_file(dir.path() + "/summary.csv");
  EXPECT_EQ(text.substr(0, text.find('\n')).substr(text.find("busbw_at_bytes")),
            "busbw_at_bytes,policy,vms,device_util_per_vm,device_util_total,"
            "device_memory_peak_mib,framebuffer_mib,vgpu_mode,repeats_does_not_fit");
  const Csv csv(text);
  const std::string be4 = kShare + "best_effort/vms4", fs4 = kShare + "fixed_share/vms4";
  const std::string t16 = "share/lenet/b32/T4-16C/fixed_share/vms4", misfit = "train/resnet50/b64/n1/none/P40-1Q",
                    t4 = "train/lenet/b32/n1/none/T4-4C";
  expect_cells(csv, {{be4, "kind", "share"},
                     {be4, "policy", "best_effort"},
                     {be4, "vms", "4"},
                     {be4, "total_img_s_median", "96.48"},
                     {be4, "img_s_per_rank_median", "24.12"},
                     {be4, "device_util_per_vm", "0.2400"},
                     {be4, "device_util_total", "0.9700"},
                     {fs4, "device_util_total", ""},
                     {be4, "device_memory_peak_mib", "403.0"},
                     {be4, "framebuffer_mib", "4096"},
                     {be4, "vgpu_mode", "emulated"},
                     {t16, "repeats_ok", "0"},
                     {t16, "total_img_s_median", ""},
                     {misfit, "repeats_failed", "0"},
                     {misfit, "repeats_does_not_fit", "2"},
                     {misfit, "framebuffer_mib", "1024"},
                     {t4, "device_memory_peak_mib", "413.5"},
                     {t4, "policy", ""}});
}

TEST(ReportVgpu, RunWithoutProfilesKeepsItsReportAsBefore) {
  TempDir dir;
  write_report(make_run(dir, standard_sweep().jsonl()), no_plots());
  const std::string md = read_file(dir.path() + "/report.md");
  EXPECT_EQ(md.find("vGPU"), std::string::npos) << md;
  EXPECT_EQ(md.find("does not fit"), std::string::npos) << md;
  EXPECT_EQ(md.find("device utilization"), std::string::npos) << md;
  EXPECT_EQ(md.find("Did not fit"), std::string::npos) << md;
  const std::string csv = read_file(dir.path() + "/summary.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')).size() - csv.find(",busbw_at_bytes"),
            std::string(",busbw_at_bytes").size());
  EXPECT_EQ(csv.find("policy"), std::string::npos);
}

TEST(ReportVgpu, SameRawJsonlGivesTheSameBytes) { expect_same_bytes(vgpu_sweep().jsonl()); }

TEST(ReportVgpu, SharingPlotsDrawnWithGnuplot) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
  TempDir dir;
  write_report(make_run(dir, vgpu_sweep().jsonl()));
  const std::string md = read_file(dir.path() + "/report.md");
  for (const char* name :
       {"lenet-share-step-time", "lenet-share-utilization", "lenet-share-throughput"}) {
    const std::string base = dir.path() + "/plots/" + name;
    EXPECT_NE(read_file(base + ".svg").find("<svg"), std::string::npos) << name;
    EXPECT_NE(read_file(base + ".gp").find("set xtics ('T4-4C' 0, 'T4-16C' 1)"), std::string::npos)
        << name;
    EXPECT_NE(md.find(std::string("](plots/") + name + ".svg)"), std::string::npos) << name;
  }
  // Skipped 4 VMs points of T4-16C draw no bar; an unmeasured device total neither.
  const std::string dat = read_file(dir.path() + "/plots/lenet-share-utilization.dat");
  EXPECT_NE(dat.find("# best_effort, 4 VMs, device total\n"), std::string::npos) << dat;
  EXPECT_EQ(dat.find("# fixed_share, 4 VMs, device total"), std::string::npos) << dat;
}

TEST(ReportVgpu, OkShareRecordNeedsItsTotal) {
  Sweep s = vgpu_sweep();
  for (auto& r : s.records)
    if (r["kind"] == "share" && r["status"] == "ok") {
      r["share"]["summary"].erase("total_img_s");
      break;
    }
  TempDir dir;
  ::testing::internal::CaptureStderr();
  write_report(make_run(dir, s.jsonl()), no_plots());  // the other records still report
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("status ok but share.summary.total_img_s.mean is missing: record left out"), std::string::npos)
      << err;
}

TEST(ReportVgpu, CompareSharePointsAndDoesNotFitIsNoRegression) {
  // B: 20% slower, and lenet on T4-4C no longer fits.
  const Sweep slower =
      without_result(vgpu_sweep(0.8), "train/lenet/b32/n1/none/T4-4C", "does_not_fit", "out of device memory");
  const auto [rc, out] = compare(vgpu_sweep().jsonl(), slower.jsonl());
  EXPECT_EQ(rc, 1) << out;
  // The six ok share points are 20% slower; the misfit is not counted against B.
  EXPECT_NE(out.find("6 regressions beyond noise, 0 faster, 1 ok, 0 failed, 2 does not fit, 2 "
                     "skipped"),
            std::string::npos) << out;
  EXPECT_EQ(out.find("with a result in A failed in B"), std::string::npos) << out;
  std::stringstream lines(out);
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind(kShare + "best_effort/vms4", 0) == 0) {
      EXPECT_NE(l.find("total img/s"), std::string::npos) << l;
      EXPECT_NE(l.find("-20.0"), std::string::npos) << l;
      EXPECT_NE(l.find("REGRESSION"), std::string::npos) << l;
    }
    if (l.rfind("train/lenet/b32/n1/none/T4-4C", 0) == 0) {
      EXPECT_NE(l.find("does not fit"), std::string::npos) << l;
    }
  }
}

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
