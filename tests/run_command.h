// Runs a shell command for end-to-end tests of the ringbench binary; captures its output.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/error_text.h"

namespace ringbench::testing {

// This build tree's ringbench binary (runner/ringbench beside the tests/ folder this program is
// in), found at run time rather than compiled in: a test file then compiles the same in every
// tree, and scripts/test.sh's cuda tree takes it from the release tree's ccache.
inline const std::string& ringbench_bin() {
  static const std::string path =
      (std::filesystem::canonical("/proc/self/exe").parent_path().parent_path() / "runner" / "ringbench").string();
  return path;
}
#define RINGBENCH_BIN (::ringbench::testing::ringbench_bin())

// Unique per process and call: ctest runs tests of one binary as concurrent processes. Every path
// lies in one directory of this process, removed with all it holds when the process exits, so a
// test leaves nothing behind in the temporary directory whatever suffix it adds.
inline std::string temp_path(const std::string& name) {
  static const std::string dir = [] {
    std::string d = ::testing::TempDir() + "ringbench-test-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(::testing::TempDir() + "ringbench-test-" + std::to_string(getpid()), ignored);
    });
    return d + "/";
  }();
  static int counter = 0;
  return dir + name + "_" + std::to_string(counter++);
}

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& cmd) {
  std::string out_file = temp_path("cmd_output") + ".txt";
  int status = std::system((cmd + " >" + out_file + " 2>&1").c_str());
  std::ifstream in(out_file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove(out_file.c_str());
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, ss.str()};
}

// A sweep config file with `body` under a fresh name; returns its path.
inline std::string write_config(const std::string& body) {
  const std::string path = temp_path("sweep") + ".yaml";
  std::ofstream(path) << body;
  return path;
}

// `bin sweep` of the config `yaml` into `out_dir`; `env` goes before the command
// ("OMP_WAIT_POLICY=passive").
inline CommandResult run_sweep(const std::string& bin, const std::string& yaml, const std::string& out_dir,
                               const std::string& env = "") {
  return run_command((env.empty() ? "" : env + " ") + bin + " sweep " + write_config(yaml) + " --out " + out_dir);
}

// A sweep's records: raw.jsonl of `dir`, one JSON object per line.
inline std::vector<nlohmann::json> read_raw(const std::string& dir) {
  std::vector<nlohmann::json> out;
  std::ifstream f(dir + "/raw.jsonl");
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// Every one of `parts` is in `text`; a failure names the missing ones, then the text.
inline ::testing::AssertionResult has_all(const std::string& text, const std::vector<std::string>& parts) {
  std::string missing;
  for (const std::string& part : parts)
    if (text.find(part) == std::string::npos) missing += "\n  " + part;
  if (missing.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "missing:" << missing << "\nin:\n" << text;
}

// `cmd` fails (exits non-zero) and its output says `message`.
inline ::testing::AssertionResult fails_saying(const std::string& cmd, const std::string& message) {
  const CommandResult r = run_command(cmd);
  if (r.exit_code != 0 && r.output.find(message) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << cmd << "\nexited " << r.exit_code << "; expected an error saying '" << message
                                       << "', got:\n" << r.output;
}

// A GPU option refused at once, before any rank starts, where there is no GPU or the build lacks
// `library` (CUDA, NCCL): the error names `option` and says which.
inline ::testing::AssertionResult refused_without_gpu(const CommandResult& r, const std::string& option,
                                                      const std::string& library) {
  const auto has = [&](const std::string& part) { return r.output.find(part) != std::string::npos; };
  if (r.exit_code == 0) return ::testing::AssertionFailure() << option << " ran:\n" << r.output;
  if (!has(option)) return ::testing::AssertionFailure() << "the error does not name " << option << ":\n" << r.output;
  if (!has("built without " + library) && !has("no CUDA device"))
    return ::testing::AssertionFailure() << "the error does not say why:\n" << r.output;
  if (has("[rank")) return ::testing::AssertionFailure() << "a rank started:\n" << r.output;
  return ::testing::AssertionSuccess();
}

// A whole file's text ("" when it cannot be read).
inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// RUN_DIR's report.md and summary.csv, deleted and written again by `bin report RUN_DIR`, come
// out byte for byte as they were: a report is derived from raw.jsonl alone.
inline ::testing::AssertionResult report_regenerates(const std::string& bin, const std::string& dir) {
  const std::string report = read_text(dir + "/report.md"), csv = read_text(dir + "/summary.csv");
  std::filesystem::remove(dir + "/report.md");
  std::filesystem::remove(dir + "/summary.csv");
  const CommandResult r = run_command(bin + " report " + dir);
  if (r.exit_code != 0) return ::testing::AssertionFailure() << "ringbench report failed:\n" << r.output;
  if (read_text(dir + "/report.md") != report) return ::testing::AssertionFailure() << "report.md differs";
  if (read_text(dir + "/summary.csv") != csv) return ::testing::AssertionFailure() << "summary.csv differs";
  return ::testing::AssertionSuccess();
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

// A command run with `--json FILE` added: its exit code, its output, and the document it wrote
// (null when it wrote none).
struct JsonRun {
  int exit_code;
  std::string output;
  nlohmann::json doc;
};

inline JsonRun run_json(const std::string& cmd) {
  const std::string path = temp_path("run") + ".json";
  const CommandResult r = run_command(cmd + " --json " + path);
  JsonRun out{r.exit_code, r.output, nullptr};
  if (std::filesystem::exists(path)) out.doc = read_json(path);
  std::remove(path.c_str());
  return out;
}

}  // namespace ringbench::testing
