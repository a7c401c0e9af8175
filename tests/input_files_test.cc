// Files named on the command line or in configs (sweep configs, vGPU catalogs, what-if files)
// are read only when they are regular files of a sane size (issue 38): /dev/zero, a FIFO or a
// huge file is a clear error at once, never a hang or an out-of-memory kill, and an error never
// echoes more of a file than the offending value, cut short.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "base/errors.h"
#include "base/input_file.h"
#include "runner/predict/whatif.h"
#include "runner/sweep/sweep_config.h"
#include "tests/run_command.h"
#include "vgpu/catalog.h"

namespace ringbench {
namespace {

namespace fs = std::filesystem;
using testing::has_all;

// The error of `load(path)` ("" when it loads), and that it came within 10 s (a FIFO's reader
// would otherwise wait for a writer forever).
std::string load_error(const std::function<void()>& load) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string err;
  try {
    load();
  } catch (const Error& e) {
    err = e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  return err;
}

class InputFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_path("inputs");
    fs::create_directories(dir_);
    fifo_ = dir_ + "/fifo.yaml";
    ASSERT_EQ(mkfifo(fifo_.c_str(), 0600), 0);
    big_ = dir_ + "/big.yaml";
    std::ofstream(big_) << "name: t\n";
    fs::resize_file(big_, size_t(64) << 20);  // sparse: 64 MiB of zeros after the first line
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Every way a path can be the wrong file, with what the error must say.
  std::vector<std::pair<std::string, std::string>> wrong_files() const {
    return {{"/dev/zero", "is a character device: only a regular file is read"},
            {fifo_, "is a FIFO: only a regular file is read"},
            {dir_, "is a directory: only a regular file is read"},
            {big_, "is larger than 4 MiB: refused"}};
  }
  std::string dir_, fifo_, big_;
};

TEST_F(InputFiles, SweepConfigMustBeARegularFileOfASaneSize) {
  for (const auto& [path, says] : wrong_files())  // a lambda captures the path by name (clang 14)
    EXPECT_TRUE(has_all(load_error([&, &p = path] { load_sweep_config(p); }), {"the sweep config " + path, says}))
        << path;
}

TEST_F(InputFiles, VgpuCatalogNamedInAConfigMustBeARegularFile) {
  for (const auto& [path, says] : wrong_files()) {
    const std::string cfg = "name: t\ncluster: {type: local}\nvgpu_catalog: " + path + "\ntrain: {models: [lenet]}\n";
    EXPECT_TRUE(has_all(load_error([&] { parse_sweep_config(cfg, "t.yaml"); }), {"the vGPU catalog " + path, says}))
        << path;
  }
}

TEST_F(InputFiles, WhatIfFileMustBeARegularFile) {
  for (const auto& [path, says] : wrong_files())
    EXPECT_TRUE(has_all(load_error([&, &p = path] { predict::load_what_if(p); }), {"the what-if file " + path, says}))
        << path;
}

// A file that is not a catalog (here: a secret's line) is named, not shown.
TEST_F(InputFiles, ACatalogErrorNeverEchoesTheFile) {
  const std::string secret = "token-" + std::string(200, 'x') + "-end";
  const std::string path = dir_ + "/not-a-catalog.yaml";
  std::ofstream(path) << secret << "\n";
  const std::string err = load_error([&] { vgpu::Catalog::load(path); });
  EXPECT_TRUE(has_all(err, {path, "must be a mapping of keys to values (got plain text)"})) << err;
  EXPECT_EQ(err.find("token-"), std::string::npos) << err;
}

TEST(QuoteExcerpt, CutsAndHidesControlCharacters) {
  EXPECT_EQ(quote_excerpt("lenet"), "'lenet'");
  EXPECT_EQ(quote_excerpt("a\nb\x7f"), "'a?b?'");
  EXPECT_EQ(quote_excerpt(std::string(50, 'y'), 10), "'" + std::string(10, 'y') + "...'");
}

}  // namespace
}  // namespace ringbench
