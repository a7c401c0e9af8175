// libFuzzer: the report's raw.jsonl reader and everything report derives from its records
// (runner/report.cc). Any raw.jsonl gives a report or an Error naming the culprit.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "base/errors.h"
#include "runner/report.h"

namespace {

const std::string& run_dir() {
  static const std::string dir = [] {
    char path[] = "/tmp/ringbench-fuzz-report-XXXXXX";
    if (!::mkdtemp(path)) {
      std::perror("mkdtemp");
      std::abort();
    }
    return std::string(path);
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
