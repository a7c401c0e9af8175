// End-to-end tests of `ringbench infer`: the three LoadGen scenarios on a real (small) network,
// inference's memory against training's, and clear errors for bad input. Runs are cut far below
// LoadGen's minimums, so every result must say INVALID and why.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/run_command.h"

namespace ringbench {
namespace {

using namespace ringbench::testing;  // run_command.h
const std::string kBin = RINGBENCH_BIN;
const std::string kQuick = " infer --max-batch 4 --min-queries 0 --threads 1";

TEST(InferCli, ScenariosMemoryAndLoadGenValidity) {
  auto [code, output, doc] = run_json(kBin + kQuick + " --model lenet --min-duration 0.2 --batches 1,4 --server-qps 50 "
                                      "--latency-bound-ms 1000");
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(has_all(output, {"# ringbench infer: lenet", "Offline: batch 4", "SingleStream: p90", "Server: 50.0 QPS",
                               "INVALID (min duration 600 s"}));
  EXPECT_EQ(doc["meta"]["allowed_batches"], nlohmann::json({1, 2, 4}));
  const auto& mem = doc["memory"];
  EXPECT_GT(mem["training_mib"].get<double>(), 0);
  EXPECT_LE(mem["inference_over_training"].get<double>(), 0.5) << mem.dump();
  ASSERT_EQ(doc["offline"].size(), 2u);
  for (const auto& o : doc["offline"]) {
    EXPECT_GT(o["samples_per_s"].get<double>(), 0);
    EXPECT_FALSE(o["validity"]["valid"].get<bool>());
  }
  EXPECT_GT(doc["single_stream"]["latency"]["count"].get<int64_t>(), 0);
  const auto& server = doc["server"]["runs"][0];
  EXPECT_EQ(server["target_qps"], 50.0);
  EXPECT_TRUE(server["bound_met"].get<bool>()) << server.dump();  // 1 s for lenet on any machine
}

TEST(InferCli, ServerSearchesThePeak) {
  auto [code, output, doc] = run_json(kBin + kQuick + " --model lenet --scenarios server --min-duration 0.1 "
                                      "--latency-bound-ms 20");
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(has_all(output, {"searching for the highest QPS", "Server peak"})) << output;
  EXPECT_FALSE(doc["server"]["tries"].empty());
  EXPECT_FALSE(doc.contains("offline"));
}

TEST(InferCli, BadOptionsAreClearErrors) {
  EXPECT_TRUE(fails_saying(kBin + kQuick + " --model lenet --batches 8", "--batches: 8 is outside 1..--max-batch (4)"));
  EXPECT_TRUE(fails_saying(kBin + kQuick + " --model lenet --scenarios offline,multistream", "'multistream' is not offline"));
  EXPECT_TRUE(fails_saying(kBin + kQuick + " --model resnet", "resnet"));
  EXPECT_TRUE(fails_saying(kBin + kQuick + " --model lenet --backend onednn --device cuda", "--backend onednn computes on the CPU"));
}

}  // namespace
}  // namespace ringbench
