// The sanity check that training learns, as a long test (label `long`): lenet on
// Fashion-MNIST for one epoch, two ranks each reading its own shard, then the test set.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tests/run_command.h"

namespace ringbench {
namespace {

using testing::run_command;
using testing::temp_path;
const std::string kBin = RINGBENCH_BIN;

TEST(TrainLong, LenetFashionMnistOneEpochReaches85Percent) {
  if (run_command("test -d /usr/share/datasets/fashion-mnist").exit_code != 0)
    GTEST_SKIP() << "Fashion-MNIST not installed (Debian package dataset-fashion-mnist)";
  const std::string json = temp_path("fmnist") + ".json";
  auto r = run_command(kBin + " train --model lenet --data fashion-mnist --epochs 1 --batch 32 "
                       "--warmup 5 --lr 0.005 --eval --log-every 200 --ranks 2 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream f(json);
  auto doc = nlohmann::json::parse(f);
  std::cout << r.output.substr(r.output.rfind("Img/sec")) << "\n";
  EXPECT_EQ(doc["eval"]["samples"], 10000);
  EXPECT_GE(doc["eval"]["test_accuracy"].get<double>(), 0.85) << r.output;
  std::remove(json.c_str());
}

}  // namespace
}  // namespace ringbench
