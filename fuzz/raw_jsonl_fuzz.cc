// libFuzzer: the report's raw.jsonl reader and everything report derives from its records
// (runner/report/). Any raw.jsonl gives a report or an Error naming the culprit.
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

const std::string& run_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/ringbench-fuzz-report-XXXXXX";
    if (!::mkdtemp(path.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    static std::string made;
    made = path;
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(made, ignored);
    });
    return path;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::cerr.setstate(std::ios::failbit);  // the report's warnings, once per input: too many
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream raw(run_dir() + "/raw.jsonl", std::ios::binary | std::ios::trunc);
    raw.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  ringbench::ReportOptions opts;
  opts.plots = false;
  try {
    ringbench::write_report(run_dir(), opts);
  } catch (const ringbench::Error&) {
  }
  return 0;
}
