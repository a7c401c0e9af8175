// `--hierarchical` end to end: local ranks standing for 2 nodes x 2 ranks (and 3 x 2 for uneven
// shares), the table's rows exact and labelled hier, both levels in the path lines and in the
// JSON, training that agrees on every rank, and the combinations that cannot run refused with
// the option at fault named.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/run_command.h"

namespace ringbench {
namespace {

using namespace ringbench::testing;  // run_command.h
const std::string kBin = RINGBENCH_BIN;

TEST(HierarchicalCli, AllreduceIsExactAndShowsBothLevels) {
  auto [code, output, doc] = run_json(kBin + " allreduce --ranks 4 --ranks-per-node 2 --hierarchical -b 0 -e 1M -f 8 "
                                      "-n 2 -w 1 --timeout 10");
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(has_all(output, {"# algorithm per row: hier: reduce-scatter within each node of 2 ranks over shm",
                               "across the 2 nodes over tcp", "hierarchical=2 nodes x 2 ranks", "intra.transport=shm",
                               "inter.transport=tcp", "--ranks-per-node 2 --hierarchical",
                               "# Out of bounds values : 0 OK"}))
      << output;
  EXPECT_EQ(doc["meta"]["options"]["hierarchical"], true);
  EXPECT_EQ(doc["meta"]["options"]["ranks_per_node"], 2);
  ASSERT_EQ(doc["rows"].size(), 16u);  // 0 .. 1M bytes by 8: 8 sizes, both ways
  for (auto& row : doc["rows"]) {
    EXPECT_EQ(row["wrong"], 0) << row;
    EXPECT_EQ(row["algo"], "hier") << row;
  }
}

// 6 ranks as 3 nodes x 2, averaged, sizes whose shares differ by an element.
TEST(HierarchicalCli, UnevenSharesAtThreeNodesAreExact) {
  auto [code, output, doc] = run_json(kBin + " allreduce --ranks 6 --ranks-per-node 2 --hierarchical -b 4 -e 100K "
                                      "-f 7 -n 1 -w 0 -o avg --timeout 20");
  ASSERT_EQ(code, 0) << output;
  for (auto& row : doc["rows"]) EXPECT_EQ(row["wrong"], 0) << row;
}

TEST(HierarchicalCli, TrainingAgreesOnEveryRankAndSaysSo) {
  const std::string json = temp_path("hier-train") + ".json";
  auto r = run_command(kBin + " train --model lenet --batch 8 --steps 2 --warmup 1 --ranks 4 --ranks-per-node 2 "
                       "--hierarchical --threads 1 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_all(r.output, {"hierarchical ring (ours): shm within nodes of 2 ranks, tcp across 2 nodes"})) << r.output;
  auto doc = read_json(json);
  EXPECT_EQ(doc["meta"]["hierarchical"], true);
  EXPECT_EQ(doc["meta"]["ranks_per_node"], 2);
  EXPECT_EQ(doc["meta"]["path"]["inter.transport"], "tcp");
  EXPECT_EQ(doc["meta"]["path"]["intra.transport"], "shm");
  std::remove(json.c_str());
}

// Training through the pipelined levels (LeNet's gradients in chunks of 16 KiB) ends with the
// same parameters, bit for bit, as with the levels one after the other: at 2 ranks per node and 2
// nodes every sum is one addition, whatever the chunks.
TEST(HierarchicalCli, PipelinedTrainingEndsWhereTheLevelsOneAfterTheOtherEnd) {
  std::string checkpoint[2];
  for (int pipelined : {0, 1}) {
    const std::string json = temp_path("hier-train-chunk") + ".json";
    checkpoint[pipelined] = temp_path("hier-train-chunk") + ".ckpt";
    auto r = run_command(kBin + " train --model lenet --batch 8 --steps 3 --warmup 1 --ranks 4 --ranks-per-node 2 "
                         "--hierarchical --threads 1 --hier-chunk " + (pipelined ? "16K" : "0") +
                         " --save-checkpoint " + checkpoint[pipelined] + " --json " + json);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto doc = read_json(json);
    EXPECT_EQ(doc["meta"]["hier_chunk_bytes"], pipelined ? 16384 : 0);
    EXPECT_EQ(doc["meta"]["path"]["hierarchical.pipeline"],
              pipelined ? "pipelined in chunks of 16384 B" : "levels one after the other");
    std::remove(json.c_str());
  }
  std::ifstream a(checkpoint[0], std::ios::binary), b(checkpoint[1], std::ios::binary);
  const std::string bytes_a((std::istreambuf_iterator<char>(a)), {}), bytes_b((std::istreambuf_iterator<char>(b)), {});
  EXPECT_FALSE(bytes_a.empty());
  EXPECT_TRUE(bytes_a == bytes_b) << "the pipelined run's parameters differ from the one-after-the-other run's";
  for (const auto& c : checkpoint) std::remove(c.c_str());
}

TEST(HierarchicalCli, CombinationsThatCannotRunAreClearErrors) {
  auto r = run_command(kBin + " allreduce --ranks 4 --ranks-per-node 3 --hierarchical -e 4K");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has_all(r.output, {"--ranks-per-node 3 does not divide the 4 ranks"})) << r.output;
  r = run_command(kBin + " allreduce --ranks 4 --ranks-per-node 2 --hierarchical --transport shm -e 4K");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has_all(r.output, {"--hierarchical --transport shm", "must reach other hosts"})) << r.output;
  r = run_command(kBin + " allgather --ranks 4 --ranks-per-node 2 --hierarchical -e 4K");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has_all(r.output, {"allgather has no hierarchical algorithm"})) << r.output;
  r = run_command(kBin + " allreduce --ranks 2 --ranks-per-node 0 -e 4K");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has_all(r.output, {"--ranks-per-node must be at least 1"})) << r.output;
  r = run_command(kBin + " train --model lenet --ranks 4 --ranks-per-node 2 --hierarchical --migrate-at 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has_all(r.output, {"--hierarchical runs two levels that do not re-form yet"})) << r.output;
}

}  // namespace
}  // namespace ringbench
