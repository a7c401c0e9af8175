// The report tests' fixture: a synthetic sweep's raw.jsonl with known numbers (Sweep), run
// directories, summary.csv cells, report sections, and the byte-for-byte check. Shared by
// report_test.cc (the report and `ringbench compare`) and report_vgpu_test.cc.
#pragma once

#include "runner/report/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/errors.h"
#include "tests/run_command.h"

namespace ringbench::report_testing {

using json = nlohmann::json;
namespace fs = std::filesystem;
using ringbench::testing::has_all;

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

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline bool have_gnuplot() {
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

inline Sweep standard_sweep(double scale = 1, uint64_t wrong = 0) {
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

inline std::string make_run(const TempDir& dir, const std::string& jsonl) {
  write_file(dir.path() + "/raw.jsonl", jsonl);
  return dir.path();
}

inline ReportOptions no_plots() {
  ReportOptions o;
  o.plots = false;
  return o;
}

// Every record of `point` in `s` made one that ran without a result: `status` and `error`.
inline Sweep without_result(Sweep s, const std::string& point, const std::string& status, const std::string& error) {
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
inline Compared compare(const std::string& a_raw, const std::string& b_raw, double threshold = 0.05,
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
inline std::string section(const std::string& md, const std::string& heading) {
  const size_t start = md.find(heading);
  if (start == std::string::npos) return "";
  const size_t end = md.find("\n## ", start + heading.size());
  return md.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// One cell of summary.csv and the text it must hold.
struct Cell {
  std::string point, column, value;
};

inline void expect_cells(const Csv& csv, const std::vector<Cell>& cells) {
  for (const Cell& c : cells) EXPECT_EQ(csv.at(c.point, c.column), c.value) << c.point << ", " << c.column;
}

const std::string kN2Tcp = "train/lenet/b32/n2/tcp/none", kN4Tcp = "train/lenet/b32/n4/tcp/none";

inline std::vector<std::string> output_files(const std::string& dir) {
  std::vector<std::string> files = {"report.md", "summary.csv"};
  if (fs::exists(dir + "/plots"))
    for (const auto& e : fs::directory_iterator(dir + "/plots"))
      files.push_back("plots/" + e.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

inline void remove_outputs(const std::string& dir) {
  fs::remove(dir + "/report.md");
  fs::remove(dir + "/summary.csv");
  fs::remove_all(dir + "/plots");
}

// The report of `raw` written again in the same directory, and in another one (no absolute path
// may leak in), has the same files, byte for byte.
inline void expect_same_bytes(const std::string& raw) {
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

}  // namespace ringbench::report_testing
