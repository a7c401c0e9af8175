// libFuzzer: the report's raw.jsonl reader and everything report derives from its records
// (runner/report/), plot scripts included. Any raw.jsonl gives a report or an Error naming the
// culprit, and no record puts a line of its own into a gnuplot script (issue 38: a name with a
// newline ended a title string, and gnuplot ran the next line). gnuplot itself is replaced by
// /bin/echo on PATH: the scripts are written and checked, not drawn.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "base/errors.h"
#include "runner/report/report.h"

namespace {

namespace fs = std::filesystem;

std::string make_temp_dir(const char* name) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + name + "-XXXXXX";
  if (!::mkdtemp(path.data())) {
    std::perror("mkdtemp");
    std::abort();
  }
  return path;
}

std::string g_run_dir, g_bin_dir;

void remove_dirs() {
  std::error_code ignored;
  fs::remove_all(g_run_dir, ignored);
  fs::remove_all(g_bin_dir, ignored);
}

// What the report writes into a script: comments, set commands, and a plot command continued
// on lines that start with spaces. Any other line came from a record.
bool is_script_line(const std::string& l) {
  return l.empty() || l.rfind("#", 0) == 0 || l.rfind("set ", 0) == 0 || l.rfind("plot ", 0) == 0 ||
         l.rfind("     ", 0) == 0;
}

void check_scripts() {
  const fs::path plots = fs::path(g_run_dir) / "plots";
  std::error_code ec;
  if (!fs::is_directory(plots, ec)) return;
  for (const auto& f : fs::directory_iterator(plots)) {
    if (f.path().extension() != ".gp") continue;
    std::ifstream in(f.path());
    for (std::string l; std::getline(in, l);)
      if (!is_script_line(l)) {
        std::fprintf(stderr, "%s: a record's text became a script line: %s\n", f.path().c_str(), l.c_str());
        std::abort();
      }
  }
  fs::remove_all(plots, ec);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::cerr.setstate(std::ios::failbit);  // the report's warnings, once per input: too many
  g_run_dir = make_temp_dir("ringbench-fuzz-report");
  g_bin_dir = make_temp_dir("ringbench-fuzz-bin");
  fs::create_symlink("/bin/echo", g_bin_dir + "/gnuplot");  // prints the script's name: an "SVG"
  setenv("PATH", g_bin_dir.c_str(), 1);
  std::atexit(remove_dirs);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream raw(g_run_dir + "/raw.jsonl", std::ios::binary | std::ios::trunc);
    raw.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    ringbench::write_report(g_run_dir, ringbench::ReportOptions{});
  } catch (const ringbench::Error&) {
  }
  check_scripts();
  return 0;
}
