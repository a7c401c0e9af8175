// Sweep configs' infer section: defaults, every mistake an error naming its key, the points it
// expands to (one per model entry, repeat and profile of the section, on one node, whatever the
// top level's profiles; with sharing, 1 and k VMs per time-sliced profile and policy) and the
// `ringbench infer` (or `vgpu share -- infer`) command line of each.
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
using testing::local_config;

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
      parse_sweep_config(local_config("infer:\n  models: [mobilenet_v1]\n"), "test.yaml");
  EXPECT_EQ(scalar.infer.models.back().model, "mobilenet_v1");
  EXPECT_EQ(scalar.infer.models.back().max_batch, 8);
}

TEST(InferSweepConfig, MistakesNameTheirKey) {
  expect_error(with("  warmup: 3\n"), {"infer.warmup", "unknown key", "min_duration"});
  expect_error(with("  scenarios: [offline, multi-stream]\n"), {"infer.scenarios", "multi-stream", "single-stream"});
  expect_error(with("  batches: [1, 8]\n"), {"infer.batches", "8 is outside 1..max_batch (4"});
  expect_error(with("  batches: [2, 2]\n"), {"infer.batches", "listed twice"});
  expect_error(with("  latency_bound_ms: 0\n"), {"infer.latency_bound_ms", "must be from 0.001 to"});
  expect_error(with("  min_duration: -2\n"), {"infer.min_duration", "-1 for LoadGen's 600 s"});
  expect_error(with("  min_queries: -5\n"), {"infer.min_queries"});
  expect_error(with("  min_duration: 20\n  max_duration: 10\n"), {"infer.min_duration", "<= max_duration"});
  expect_error(with("  backend: tpu\n"), {"infer.backend", "'tpu'"});
  expect_error(with("  server_qps: -1\n"), {"infer.server_qps"});
  expect_error(local_config("infer:\n  models: [{model: resnet50}]\n"),
               {"infer.models[0].model", "'resnet50'", "mobilenet_v1"});
  expect_error(local_config("infer:\n  models: [{model: inception_v3, image_size: 20}]\n"),
               {"infer.models[0].image_size"});
  expect_error(local_config("infer:\n  models: [{model: lenet, max_batch: 0}]\n"),
               {"infer.models[0].max_batch", "must be from 1 to"});
  expect_error(local_config("infer:\n  models: [{model: lenet, batch: 4}]\n"),
               {"infer.models[0].batch", "unknown key", "max_batch"});
  expect_error(local_config("infer:\n  models: [lenet, lenet]\n"), {"infer.models[1]", "listed twice"});
  expect_error(local_config("infer:\n  scenarios: [offline]\n"), {"infer.models", "missing"});
  expect_error(local_config("infer: []\n"), {"infer", "mapping"});
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

// The section's vGPU keys: the same names and checks as the top level's.
TEST(InferSweepConfig, ProfilesAndSharingMistakesNameTheirKey) {
  expect_error(with("  profiles: [T4-4C, Z9-1Q]\n"), {"infer.profiles", "Z9-1Q"});
  expect_error(with("  profiles: [T4-4C, t4-4c]\n"), {"infer.profiles", "T4-4C is listed twice"});
  expect_error(with("  profiles: []\n"), {"infer.profiles", "non-empty list"});
  expect_error(with("  sharing: {vms_per_gpu: 2}\n"), {"infer.sharing", "time-sliced vGPU profile under infer.profiles"});
  expect_error(with("  profiles: [A100-3-20C]\n  sharing: {vms_per_gpu: 2}\n"), {"infer.sharing", "time-sliced"});
  expect_error(with("  profiles: [T4-4C]\n  sharing: {policy: round_robin}\n"), {"infer.sharing.policy", "round_robin"});
  expect_error(with("  profiles: [T4-4C]\n  sharing: {policy: [fixed_share, fixed_share]}\n"),
               {"infer.sharing.policy", "listed twice"});
  expect_error(with("  profiles: [T4-4C]\n  sharing: {vms_per_gpu: 0}\n"), {"infer.sharing.vms_per_gpu", "must be from 1 to"});
  expect_error(with("  profiles: [T4-4C]\n  sharing: {slice_ms: 5000}\n"), {"infer.sharing.slice_ms", "<= 1000"});
  expect_error(with("  profiles: [T4-4C]\n  sharing: {vms: 2}\n"), {"infer.sharing.vms", "unknown key", "vms_per_gpu"});
  expect_error(with("  profiles: [T4-4C]\n  sharing: {scenarios: [offline, batch]}\n"),
               {"infer.sharing.scenarios", "'batch'"});
  expect_error(with("  profiles: [T4-4C]\n  sharing: {models: [mobilenet_v1]}\n"),
               {"infer.sharing.models", "'mobilenet_v1' is not one of the models of infer.models"});
  // The top level's sharing still wants train: the infer section has its own.
  expect_error("name: t\ncluster: {type: local}\nprofiles: [T4-4C]\nsharing: {vms_per_gpu: 2}\n"
               "infer:\n  models: [lenet]\n",
               {"sharing", "needs a train section"});
}

TEST(InferSweepConfig, PointsPerProfileThenKVmsPerPolicy) {
  const SweepConfig c = parse_sweep_config(
      "name: t\nrepeats: 1\ncluster: {type: local}\n"
      "infer:\n  models: [{model: lenet, max_batch: 4}, {model: mobilenet_v1, image_size: 32, max_batch: 2}]\n"
      "  profiles: [none, t4-4c, T4-16C]\n"
      "  sharing: {vms_per_gpu: 2, policy: [best_effort, fixed_share], models: [lenet]}\n",
      "test.yaml");
  EXPECT_EQ(c.infer.profiles, (std::vector<std::string>{"none", "T4-4C", "T4-16C"}));  // the catalog's spelling
  std::vector<std::string> ids;
  for (const auto& p : expand_points(c)) {
    ids.push_back(p.id + (p.skip.empty() ? "" : " (skip: " + p.skip + ")"));
    EXPECT_EQ(p.kind, PointKind::infer);
    EXPECT_EQ(p.shared(), p.vms > 0);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{
                     "infer/lenet/b4/none", "infer/mobilenet_v1/b2/s32/none",
                     "infer/lenet/b4/T4-4C", "infer/mobilenet_v1/b2/s32/T4-4C",
                     "infer/lenet/b4/T4-4C/best_effort/vms1", "infer/lenet/b4/T4-4C/best_effort/vms2",
                     "infer/lenet/b4/T4-4C/fixed_share/vms1", "infer/lenet/b4/T4-4C/fixed_share/vms2",
                     "infer/lenet/b4/T4-16C", "infer/mobilenet_v1/b2/s32/T4-16C",
                     "infer/lenet/b4/T4-16C/best_effort/vms1",
                     "infer/lenet/b4/T4-16C/best_effort/vms2 (skip: T4-16C hosts at most 1 vGPU(s) per GPU)",
                     "infer/lenet/b4/T4-16C/fixed_share/vms1",
                     "infer/lenet/b4/T4-16C/fixed_share/vms2 (skip: T4-16C hosts at most 1 vGPU(s) per GPU)"}));
  // raw.jsonl keeps a shared point's policy and VMs, and none for one that is not shared.
  const auto points = expand_points(c);
  for (const SweepPoint& p : {points[2], points[5]}) {
    nlohmann::json rec;
    p.write(rec);
    const PointCoords back = PointCoords::read(rec, "test");
    EXPECT_EQ(back.policy, p.policy);
    EXPECT_EQ(back.vms, p.vms);
    EXPECT_EQ(back.profile, p.profile);
    EXPECT_EQ(rec.contains("vms"), p.vms > 0);
  }
}

std::string joined(const std::vector<std::string>& a) {
  std::string line;
  for (const auto& x : a) line += x + " ";
  return line;
}

TEST(InferSweepConfig, PointArgsOfAProfileAndOfKVmsSharingADevice) {
  const SweepConfig c = parse_sweep_config(
      "name: t\nrepeats: 1\ncluster: {type: local}\ntimeout: 100\n"
      "infer:\n  models: [{model: lenet, max_batch: 4}]\n  batches: [1, 2, 4]\n  profiles: [T4-8C]\n"
      "  sharing: {vms_per_gpu: 2, policy: equal_share, slice_ms: 5, scenarios: [offline, server]}\n",
      "test.yaml");
  const auto points = expand_points(c);
  ASSERT_EQ(points.size(), 3u);
  const std::string alone = joined(point_args(c, points[0], "/tmp/p.json", "/tmp/log"));
  for (const std::string part : {"infer --model lenet ", "--scenarios offline,single-stream,server ",
                                 "--batches 1,2,4 ", "--profile T4-8C ", "--json /tmp/p.json "})
    EXPECT_NE(alone.find(part), std::string::npos) << part << " not in: " << alone;
  const std::string shared = joined(point_args(c, points[2], "/tmp/p.json", "/tmp/log"));
  for (const std::string part : {"vgpu share --profile T4-8C --vms 2 --policy equal_share --slice-ms 5 ",
                                 "--timeout 90 --json /tmp/p.json --log-dir /tmp/log.vms -- infer --model lenet ",
                                 "--scenarios offline,server ", "--batches 4 ", "--latency-bound-ms 10 "})
    EXPECT_NE(shared.find(part), std::string::npos) << part << " not in: " << shared;
  for (const std::string absent : {"single-stream", "--profile T4-8C --json", "--batches 1,2,4"})
    EXPECT_EQ(shared.find(absent), std::string::npos) << absent << " in: " << shared;
  // The config as run keeps them.
  const SweepConfig back = parse_sweep_config(to_yaml(c), "config.yaml");
  EXPECT_EQ(to_yaml(back), to_yaml(c));
  EXPECT_EQ(back.infer.sharing_scenarios, (std::vector<std::string>{"offline", "server"}));
  EXPECT_EQ(back.infer.sharing.slice_ms, 5);
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
  // A small profiles x policies comparison with k = 2 VMs serving at once.
  EXPECT_GE(c.infer.profiles.size(), 2u);
  ASSERT_TRUE(c.infer.has_sharing);
  EXPECT_EQ(c.infer.sharing.vms_per_gpu, 2);
  EXPECT_GE(c.infer.sharing.policies.size(), 2u);
  size_t shared = 0;
  for (const auto& p : expand_points(c)) shared += p.shared() && p.vms == 2 && p.skip.empty();
  EXPECT_GE(shared, 4u * size_t(c.repeats));
}

}  // namespace
}  // namespace ringbench
