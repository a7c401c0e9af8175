// End to end: lenet trained on Fashion-MNIST with --save-checkpoint, then served by `infer
// --checkpoint --accuracy`, classifies the test set exactly as training's --eval did; and the
// CLI's errors for a checkpoint of another model or a damaged one.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/run_command.h"

namespace ringbench {
namespace {

using namespace ringbench::testing;  // run_command.h
const std::string kBin = RINGBENCH_BIN;
const char* const kFashion = "/usr/share/datasets/fashion-mnist";

bool have_fashion_mnist() { return run_command(std::string("test -d ") + kFashion).exit_code == 0; }

// A short training run's checkpoint (one per test process: trained once, read by each test).
struct Trained {
  std::string path;
  int code = 0;
  std::string output;
  nlohmann::json doc;
};
const Trained& trained_lenet() {
  static const Trained t = [] {
    Trained r;
    r.path = temp_path("lenet") + ".ckpt";
    auto [code, output, doc] = run_json(kBin + " train --model lenet --data fashion-mnist --steps 40 --warmup 2 "
                                        "--batch 32 --threads 2 --log-every 0 --eval --save-checkpoint " + r.path);
    r.code = code;
    r.output = output;
    r.doc = doc;
    return r;
  }();
  return t;
}

TEST(InferCheckpoint, ServedLenetHasTrainingsTestAccuracy) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)";
  const Trained& t = trained_lenet();
  ASSERT_EQ(t.code, 0) << t.output;
  const auto& eval = t.doc["eval"];
  ASSERT_EQ(eval["samples"], 10000);
  const auto& ck = t.doc["meta"]["checkpoint"];
  EXPECT_EQ(ck["path"], t.path);
  EXPECT_EQ(ck["format_version"], 1);
  EXPECT_EQ(ck["sha256"].get<std::string>().size(), 64u);

  // Served at training's batch: the same networks' arithmetic, so the same count exactly.
  auto [code, output, doc] = run_json(kBin + " infer --model lenet --threads 2 --max-batch 32 --checkpoint " + t.path +
                                      " --accuracy --data fashion-mnist");
  ASSERT_EQ(code, 0) << output;
  const auto& acc = doc["accuracy"];
  EXPECT_EQ(acc["samples"], 10000);
  EXPECT_EQ(acc["correct"], eval["correct"]) << t.output << output;
  EXPECT_TRUE(acc["trained"].get<bool>());
  EXPECT_EQ(doc["meta"]["checkpoint"]["sha256"], ck["sha256"]);
  char line[64];
  std::snprintf(line, sizeof line, "Accuracy: %.2f%% (%lld of 10000)", 100 * eval["test_accuracy"].get<double>(),
                (long long)eval["correct"].get<int64_t>());
  EXPECT_TRUE(has_all(output, {line, "parameters from checkpoint"}));
  EXPECT_GT(eval["test_accuracy"].get<double>(), 0.5) << "40 steps of lenet learn something";
}

TEST(InferCheckpoint, WithoutACheckpointTheParametersAreUntrained) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)";
  auto [code, output, doc] = run_json(kBin + " infer --model lenet --threads 2 --max-batch 100 --accuracy "
                                      "--data fashion-mnist");
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(has_all(output, {"Accuracy: ", " of 10000)", "untrained (seeded with --seed 42)"}));
  EXPECT_FALSE(doc["accuracy"]["trained"].get<bool>());
  EXPECT_EQ(doc["meta"]["checkpoint"], nullptr);
}

TEST(InferCheckpoint, AnotherModelOrADamagedFileIsAClearError) {
  if (!have_fashion_mnist()) GTEST_SKIP() << "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)";
  const Trained& t = trained_lenet();
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_TRUE(fails_saying(kBin + " infer --model mobilenet_v1 --image-size 32 --checkpoint " + t.path,
                           "checkpoint " + t.path + " holds lenet (1.7M parameters), not mobilenet_v1"));
  const std::string damaged = temp_path("damaged") + ".ckpt";
  std::string bytes;
  {
    std::ifstream in(t.path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 2] = char(bytes[bytes.size() / 2] ^ 1);
  std::ofstream(damaged, std::ios::binary) << bytes;
  EXPECT_TRUE(fails_saying(kBin + " infer --model lenet --checkpoint " + damaged, "is damaged: checksum mismatch"));
}

TEST(InferCheckpoint, OptionErrors) {
  EXPECT_TRUE(fails_saying(kBin + " infer --model lenet --accuracy", "--accuracy needs a labelled test set"));
  EXPECT_TRUE(fails_saying(kBin + " infer --model lenet --checkpoint /nonexistent/x.ckpt",
                           "checkpoint /nonexistent/x.ckpt does not exist"));
  EXPECT_TRUE(fails_saying(kBin + " train --steps 1 --save-checkpoint /nonexistent/dir/x.ckpt", "--save-checkpoint"));
}

// Refused from the file's type or from its header and size, never read: a device, and a 20 GiB
// sparse file whose header says it holds nothing (before, infer read such a file whole).
TEST(InferCheckpoint, ADeviceOrAFileLargerThanItsHeaderSaysIsRefusedUnread) {
  EXPECT_TRUE(fails_saying(kBin + " infer --model lenet --checkpoint /dev/zero",
                           "checkpoint /dev/zero is a character device, not a regular file"));
  const std::string header = nlohmann::json{{"model", "lenet"}, {"image_size", 28}, {"classes", 10},
                                            {"param_count", 0}, {"state_count", 0},
                                            {"signature", std::string(64, '0')}}.dump();
  std::string head = std::string("RBCKPT\r\n") + std::string("\x01\0\0\0", 4);
  for (int i = 0; i < 4; ++i) head.push_back(char((header.size() >> (8 * i)) & 0xff));
  const std::string path = temp_path("sparse") + ".ckpt";
  std::ofstream(path, std::ios::binary) << head << header;
  const uint64_t size = uint64_t(20) << 30;
  if (::truncate(path.c_str(), off_t(size)) != 0) GTEST_SKIP() << "no sparse 20 GiB file here";
  EXPECT_TRUE(fails_saying(kBin + " infer --model lenet --checkpoint " + path,
                           "header says 0 parameters and 0 state values, but the payload has " +
                               std::to_string(size - 16 - header.size() - 64) + " bytes"));
}

}  // namespace
}  // namespace ringbench
