// Sweep configs' infer section: defaults, every mistake an error naming its key, the points it
// expands to (one per model entry and repeat, on one node, whatever the profiles) and the
// `ringbench infer` command line of each.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/errors.h"
#include "runner/sweep/point_args.h"
#include "runner/sweep/sweep_config.h"
#include "tests/sweep_config_errors.h"

namespace ringbench {
namespace {

using testing::error_of;
using testing::expect_error;

const std::string kInfer = R"(
name: t
nodes: [1]
cluster: {type: local}
infer:
  models: [{model: lenet, max_batch: 4}]
)";


// kInfer with `extra` lines appended under infer:.
std::string with(const std::string& extra) { return kInfer + extra; }

TEST(InferSweepConfig, DefaultsAreLoadGens) {
  const SweepConfig c = parse_sweep_config(kInfer, "test.yaml");
  ASSERT_TRUE(c.has_infer);
  EXPECT_FALSE(c.has_train);
  ASSERT_EQ(c.infer.models.size(), 1u);
  EXPECT_EQ(c.infer.models[0].max_batch, 4);
  EXPECT_EQ(c.infer.scenarios, (std::vector<std::string>{"offline", "single-stream", "server"}));
  EXPECT_TRUE(c.infer.batches.empty());
  EXPECT_EQ(c.infer.latency_bound_ms, 10);
  EXPECT_EQ(c.infer.min_duration_s, -1);
  EXPECT_EQ(c.infer.min_queries, -1);
  const SweepConfig scalar =
      parse_sweep_config("name: t\ncluster: {type: local}\ninfer:\n  models: [mobilenet_v1]\n", "test.yaml");
  EXPECT_EQ(scalar.infer.models.back().model, "mobilenet_v1");
  EXPECT_EQ(scalar.infer.models.back().max_batch, 8);
}

TEST(InferSweepConfig, MistakesNameTheirKey) {
  expect_error(with("  warmup: 3\n"), {"infer.warmup", "unknown key", "min_duration"});
  expect_error(with("  scenarios: [offline, multi-stream]\n"), {"infer.scenarios", "multi-stream", "single-stream"});
  expect_error(with("  batches: [1, 8]\n"), {"infer.batches", "8 is outside 1..max_batch (4"});
  expect_error(with("  batches: [2, 2]\n"), {"infer.batches", "listed twice"});
  expect_error(with("  latency_bound_ms: 0\n"), {"infer.latency_bound_ms", "> 0"});
  expect_error(with("  min_duration: -2\n"), {"infer.min_duration", "-1 for LoadGen's 600 s"});
  expect_error(with("  min_queries: -5\n"), {"infer.min_queries"});
  expect_error(with("  min_duration: 20\n  max_duration: 10\n"), {"infer.min_duration", "<= max_duration"});
  expect_error(with("  backend: tpu\n"), {"infer.backend", "'tpu'"});
  expect_error(with("  server_qps: -1\n"), {"infer.server_qps"});
  expect_error("name: t\ncluster: {type: local}\ninfer:\n  models: [{model: resnet50}]\n",
               {"infer.models[0].model", "'resnet50'", "mobilenet_v1"});
  expect_error("name: t\ncluster: {type: local}\ninfer:\n  models: [{model: inception_v3, image_size: 20}]\n",
               {"infer.models[0].image_size"});
  expect_error("name: t\ncluster: {type: local}\ninfer:\n  models: [{model: lenet, max_batch: 0}]\n",
               {"infer.models[0].max_batch", ">= 1"});
  expect_error("name: t\ncluster: {type: local}\ninfer:\n  models: [{model: lenet, batch: 4}]\n",
               {"infer.models[0].batch", "unknown key", "max_batch"});
  expect_error("name: t\ncluster: {type: local}\ninfer:\n  models: [lenet, lenet]\n",
               {"infer.models[1]", "listed twice"});
  expect_error("name: t\ncluster: {type: local}\ninfer:\n  scenarios: [offline]\n", {"infer.models", "missing"});
  expect_error("name: t\ncluster: {type: local}\ninfer: []\n", {"infer", "mapping"});
}

TEST(InferSweepConfig, OnePointPerModelAndRepeatOnOneNodeWhateverTheProfiles) {
  const SweepConfig c = parse_sweep_config(
      "name: t\nnodes: [1, 2]\nrepeats: 2\nprofiles: [none, T4-4C]\ncluster: {type: local}\n"
      "infer:\n  models: [{model: lenet, max_batch: 4}, {model: mobilenet_v1, image_size: 96, max_batch: 8}]\n",
      "test.yaml");
  std::vector<std::string> ids;
  for (const auto& p : expand_points(c)) {
    ids.push_back(p.id + " r" + std::to_string(p.repeat));
    EXPECT_EQ(p.kind, PointKind::infer);
    EXPECT_EQ(p.nodes, 1);
    EXPECT_EQ(p.transport, "none");
    EXPECT_EQ(p.profile, "none");
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"infer/lenet/b4/none r1", "infer/mobilenet_v1/b8/s96/none r1",
                                           "infer/lenet/b4/none r2", "infer/mobilenet_v1/b8/s96/none r2"}));
}

TEST(InferSweepConfig, PointArgsAreTheSectionsRunRules) {
  const SweepConfig c = parse_sweep_config(
      with("  scenarios: [offline, server]\n  batches: [1, 4]\n  latency_bound_ms: 25\n  server_qps: 40\n"
           "  min_duration: 1.5\n  min_queries: 64\n"),
      "test.yaml");
  const auto points = expand_points(c);
  ASSERT_EQ(points.size(), 3u);  // 3 repeats
  const auto a = point_args(c, points[0], "/tmp/p.json", "/tmp/log");
  std::string line;
  for (const auto& x : a) line += x + " ";
  for (const std::string part : {"infer --model lenet --max-batch 4 ", "--scenarios offline,server ",
                                 "--min-duration 1.5 --min-queries 64 ", "--batches 1,4 ", "--latency-bound-ms 25 ",
                                 "--server-qps 40 ", "--seed 42 ", "--json /tmp/p.json "})
    EXPECT_NE(line.find(part), std::string::npos) << part << " not in: " << line;
  EXPECT_EQ(line.find("--image-size"), std::string::npos) << line;
}

TEST(InferSweepConfig, ConfigAsRunParsesBackTheSame) {
  const SweepConfig c = parse_sweep_config(
      with("  batches: [1, 2]\n  min_duration: 2\n  min_queries: 32\n  latency_bound_ms: 40\n"), "test.yaml");
  const SweepConfig back = parse_sweep_config(to_yaml(c), "config.yaml");
  EXPECT_EQ(to_yaml(back), to_yaml(c));
  EXPECT_EQ(back.infer.batches, (std::vector<int>{1, 2}));
  EXPECT_EQ(back.infer.min_duration_s, 2);
  EXPECT_EQ(config_hash(back), config_hash(c));
}

TEST(InferSweepConfig, TheShippedMlaasConfig) {
  const SweepConfig c = load_sweep_config(RINGBENCH_SOURCE_DIR "/configs/mlaas.yaml");
  ASSERT_TRUE(c.has_infer);
  std::vector<std::string> models;
  for (const auto& m : c.infer.models) models.push_back(m.model);
  EXPECT_NE(std::find(models.begin(), models.end(), "mobilenet_v1"), models.end());
  EXPECT_NE(std::find(models.begin(), models.end(), "inception_v3"), models.end());
  EXPECT_EQ(c.infer.scenarios.size(), 3u);
  EXPECT_GE(c.infer.min_duration_s, 0);  // short runs: the report shows LoadGen's INVALID
}

}  // namespace
}  // namespace ringbench
