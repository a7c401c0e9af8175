// Sweep configs: the shipped ones load, defaults fill in, every mistake is an error naming the
// key, and points expand in the documented order.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "base/errors.h"
#include "runner/backends/hierarchical.h"
#include "runner/sweep/point_args.h"
#include "runner/sweep/sweep_config.h"
#include "tests/sweep_config_errors.h"

namespace ringbench {
namespace {

using testing::error_of;
using testing::expect_error;
using testing::local_config;

const std::string kMinimal = R"(
name: t
cluster: {type: local}
train:
  models: [{model: lenet, batch: 16}]
)";


TEST(SweepConfig, ShippedConfigsLoad) {
  int n = 0;
  for (const auto& f : std::filesystem::directory_iterator(RINGBENCH_SOURCE_DIR "/configs")) {
    if (f.path().extension() != ".yaml") continue;
    if (f.path().filename() == "vgpu-profiles.yaml") continue;  // the vGPU catalog, not a sweep
    if (f.path().filename().string().rfind("whatif-", 0) == 0) continue;  // predict's (predict_test)
    SCOPED_TRACE(f.path().string());
    const SweepConfig c = load_sweep_config(f.path().string());
    EXPECT_FALSE(expand_points(c).empty());
    ++n;
  }
  EXPECT_GE(n, 3);
  const SweepConfig h = load_sweep_config(RINGBENCH_SOURCE_DIR "/configs/four-node-pvrdma-vs-tcp.yaml");
  EXPECT_EQ(h.transports, (std::vector<std::string>{"tcp", "verbs"}));
  EXPECT_EQ(h.nodes, (std::vector<int>{1, 2, 4}));
  ASSERT_EQ(h.train.models.size(), 2u);
  EXPECT_EQ(h.train.models[1].model, "inception_v3");
}

TEST(SweepConfig, DefaultsFillIn) {
  const SweepConfig c = parse_sweep_config(kMinimal, "test.yaml");
  EXPECT_EQ(c.name, "t");
  EXPECT_EQ(c.nodes, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(c.transports, (std::vector<std::string>{"tcp"}));
  EXPECT_EQ(c.profiles, (std::vector<std::string>{"none"}));
  EXPECT_EQ(c.repeats, 3);
  EXPECT_TRUE(c.has_train);
  EXPECT_FALSE(c.has_collectives);
  EXPECT_EQ(c.train.models[0].batch, 16);
  EXPECT_EQ(c.train.steps, 20);
}

TEST(SweepConfig, AsRunRoundTrips) {
  const SweepConfig c = load_sweep_config(RINGBENCH_SOURCE_DIR "/configs/quick.yaml");
  const SweepConfig again = parse_sweep_config(to_yaml(c), "config.yaml");
  EXPECT_EQ(to_json(again), to_json(c));
}

TEST(SweepConfig, MistakesNameTheKey) {
  const std::string kLocal = local_config("");  // a name and a cluster, nothing to run
  expect_error(kLocal, {"train", "measures nothing"});
  expect_error(kMinimal + "speed: 3\n", {"speed", "unknown key", "transports"});
  expect_error(kMinimal + "nodes: [1, 0]\n", {"nodes", "must be from 1 to 4096 (got 0)"});
  expect_error(kMinimal + "nodes: [2, 2]\n", {"nodes", "twice"});
  expect_error(kMinimal + "nodes: [1, two]\n", {"nodes[1]", "node counts"});
  expect_error(kMinimal + "nodes: 4\n", {"nodes", "list"});
  expect_error(kMinimal + "transports: [tcp, rdma]\n", {"transports", "'rdma'", "verbs"});
  expect_error(kMinimal + "profiles: [grid_a100-4c]\n", {"profiles", "grid_a100-4c", "ringbench vgpu profiles"});
  expect_error(kMinimal + "profiles: [T4-4C, t4-4c]\n", {"profiles", "T4-4C", "twice"});
  expect_error(kMinimal + "profiles: [T4-4C]\nsharing: {vms_per_gpu: 0}\n", {"sharing.vms_per_gpu", "must be from 1 to"});
  expect_error(kMinimal + "profiles: [T4-4C]\nsharing: {policy: fair}\n", {"sharing.policy", "fair", "fixed_share"});
  expect_error(kMinimal + "profiles: [T4-4C]\nsharing: {policy: [fixed_share, fixed_share]}\n", {"sharing.policy", "twice"});
  expect_error(kMinimal + "profiles: [T4-4C]\nsharing: {slice_ms: 0}\n", {"sharing.slice_ms", "must be from 0.1 to"});
  expect_error(kMinimal + "sharing: {vms_per_gpu: 2}\n", {"sharing", "time-sliced"});
  expect_error(kMinimal + "profiles: [passthrough]\nsharing: {vms_per_gpu: 2}\n", {"sharing", "time-sliced"});
  expect_error(kLocal + "profiles: [T4-4C]\nsharing: {}\ncollectives: {}\n", {"sharing", "train"});
  expect_error(kMinimal + "vgpu_catalog: /nonexistent/catalog.yaml\n", {"vgpu_catalog", "/nonexistent/catalog.yaml"});
  expect_error(kMinimal + "repeats: 0\n", {"repeats", "must be from 1 to"});
  expect_error(kMinimal + "timeout: soon\n", {"timeout", "number", "soon"});
  expect_error("name: t\ntrain: {models: [lenet]}\n", {"cluster", "missing"});
  expect_error("name: t\ncluster: {type: cloud}\ntrain: {models: [lenet]}\n", {"cluster.type", "cloud", "emulated"});
  expect_error("name: t\ncluster: {type: local, link: 1gbit}\ntrain: {models: [lenet]}\n", {"cluster.link", "emulated"});
  expect_error("name: t\ncluster: {type: emulated, link: fast}\ntrain: {models: [lenet]}\n", {"cluster.link", "fast", "10gbit"});
  expect_error("name: t\ncluster: {type: local, hosts: [a]}\ntrain: {models: [lenet]}\n", {"cluster.hosts", "mpirun"});
  expect_error(kLocal + "train: {steps: 3}\n", {"train.models", "missing"});
  expect_error(kLocal + "train: {models: [resnet50]}\n", {"train.models[0].model", "resnet50", "inception_v3"});
  expect_error(kLocal + "train: {models: [{model: lenet, batch: 0}]}\n", {"train.models[0].batch", "must be from 1 to"});
  expect_error(kLocal + "train: {models: [{model: lenet, batch: many}]}\n", {"train.models[0].batch", "integer", "many"});
  expect_error(kLocal + "train: {models: [{model: lenet, size: 3}]}\n", {"train.models[0].size", "unknown key"});
  expect_error(kLocal + "train: {models: [lenet], backend: cuda}\n", {"train.backend", "cuda", "onednn"});
  expect_error(kLocal + "collectives: {min_bytes: 1M, max_bytes: 4K}\n", {"collectives.max_bytes", "min_bytes"});
  expect_error(kLocal + "collectives: {max_bytes: lots}\n", {"collectives.max_bytes", "lots"});
  expect_error(kLocal + "collectives: {dtype: int8}\n", {"collectives.dtype", "int8", "bfloat16"});
  expect_error("name: t\nnodes: [1]\ncluster: {type: local}\ncollectives: {}\n", {"nodes", ">= 2"});
  expect_error("name: a/b\ncluster: {type: local}\ntrain: {models: [lenet]}\n", {"name", "a/b"});
  expect_error("cluster: {type: local}\ntrain: {models: [lenet]}\n", {"name", "missing"});
  expect_error("- just\n- a list\n", {"mapping"});
  expect_error("name: [unclosed\n", {"not valid YAML"});
}

// A config is strict: what would silently be ignored, run twice or never finish is an error.
TEST(SweepConfig, RepeatedKeysAndEntriesAreErrors) {
  expect_error(kMinimal + "repeats: 2\nrepeats: 5\n", {"repeats", "appears twice", "line 7"});
  expect_error("name: t\ncluster: {type: local, type: emulated}\ntrain: {models: [lenet]}\n",
               {"cluster.type", "appears twice"});
  expect_error(local_config("train: {models: [{model: lenet, batch: 8, batch: 16}]}\n"),
               {"train.models[0].batch", "appears twice"});
  expect_error(kMinimal + "transports: [tcp, tcp]\n", {"transports", "tcp is listed twice"});
  expect_error(kMinimal + "profiles: [none, none]\n", {"profiles", "twice"});
  expect_error(local_config("train: {models: [lenet, {model: lenet, batch: 32}]}\n"),
               {"train.models[1]", "lenet with batch 32 and image_size 0 is listed twice"});
  expect_error("name: t\ncluster: {type: mpirun, hosts: [a, b, a]}\ntrain: {models: [lenet]}\n",
               {"cluster.hosts", "a is listed twice"});
}

// Found by fuzz/sweep_config_fuzz: a list or mapping as a key escaped as a yaml-cpp exception.
TEST(SweepConfig, KeysThatAreNotNamesAreErrors) {
  expect_error(kMinimal + "[repeats, seed]: 2\n", {"the file", "a key must be a plain name", "line 6"});
  expect_error("name: t\ncluster: {type: local, {a: 1}: 2}\ntrain: {models: [lenet]}\n",
               {"cluster", "a key must be a plain name"});
}

// Every number has both bounds where the config is read (issue 38): before, these passed
// validation and failed only when run (or every point "timed out" at once: a chrono overflow).
TEST(SweepConfig, EveryNumberIsBoundedWhereTheConfigIsRead) {
  expect_error(kMinimal + "timeout: 1e10\n", {"timeout: must be from 1 to 604800 (got 1e+10)"});
  expect_error(kMinimal + "timeout: .nan\n", {"timeout: must be from 1 to 604800 (got nan)"});
  expect_error(local_config("collectives: {min_bytes: 4K, max_bytes: 1M, step_factor: .inf}\nnodes: [2]\n"),
               {"collectives.step_factor: must be from 1 to 1024 (got inf)"});
  expect_error(local_config("train: {models: [{model: lenet, batch: 2000000000}]}\n"),
               {"train.models[0].batch: must be from 1 to 65536 (got 2000000000)"});
  expect_error(local_config("train: {models: [lenet], steps: 2000000000}\n"), {"train.steps: must be from 1 to"});
  expect_error(local_config("train: {models: [lenet], fusion_mb: 1e12}\n"), {"train.fusion_mb: must be from 0 to"});
  expect_error("name: t\nnodes: [5000]\ncluster: {type: mpirun}\ntrain: {models: [lenet]}\n",
               {"nodes: must be from 1 to 4096 (got 5000)"});
  const std::string long_name(255, 'n');
  expect_error("name: " + long_name + "\ncluster: {type: local}\ntrain: {models: [lenet]}\n",
               {"name: '" + std::string(40, 'n') + "...'", "at most 64"});
  EXPECT_EQ(error_of("name: " + std::string(64, 'n') + "\ncluster: {type: local}\ntrain: {models: [lenet]}\n"), "");
}

TEST(SweepConfig, SizesAreBoundedBeforeAnythingExpands) {
  expect_error(kMinimal + "repeats: 1000000000\n", {"repeats", "must be from 1 to 10000 (got 1000000000)"});
  expect_error(kMinimal + "repeats: 5000\n", {"repeats", "5000 repeats of", "points make more than 10000"});
  expect_error("name: t\nnodes: [300]\ncluster: {type: emulated}\ntrain: {models: [lenet]}\n",
               {"nodes", "300 nodes", "1 to 253"});
  expect_error("name: t\nnodes: [1, 254]\ncluster: {type: local}\ntrain: {models: [lenet]}\n", {"nodes", "1 to 253"});
  EXPECT_EQ(error_of("name: t\nnodes: [300]\ncluster: {type: mpirun}\ntrain: {models: [lenet]}\n"), "");
}

TEST(SweepConfig, MissingFileSaysSo) {
  try {
    load_sweep_config("/nonexistent/sweep.yaml");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/sweep.yaml"), std::string::npos) << e.what();
  }
}

TEST(SweepConfig, PointsExpandInOrder) {
  const SweepConfig c = parse_sweep_config(R"(
name: t
nodes: [1, 2, 4]
transports: [tcp, mpi]
repeats: 2
cluster: {type: local}
train: {models: [lenet, {model: mobilenet_v1, batch: 8, image_size: 96}]}
collectives: {}
)", "test.yaml");
  const auto points = expand_points(c);
  // Per repeat: 2 models x (N=1 once + 2 transports x 2) + collectives 2 transports x 2.
  ASSERT_EQ(points.size(), 2u * (2 * 5 + 4));
  EXPECT_EQ(points[0].id, "train/lenet/b32/n1/none/none");
  EXPECT_EQ(points[1].id, "train/lenet/b32/n2/tcp/none");
  EXPECT_EQ(points[2].id, "train/lenet/b32/n2/mpi/none");
  EXPECT_EQ(points[5].id, "train/mobilenet_v1/b8/s96/n1/none/none");
  EXPECT_EQ(points[10].id, "collectives/n2/tcp/none");
  for (size_t i = 0; i < points.size(); ++i) EXPECT_EQ(points[i].repeat, i < 14 ? 1 : 2);
  EXPECT_EQ(points[14].id, points[0].id);
}

// Profiles multiply train points; collectives run once (the profile does not change the
// network); sharing adds, per time-sliced profile, model and policy, a 1-VM and a k-VM point,
// the k-VM one skipped with the reason where the profile hosts fewer than k vGPUs.
// `precision:` in train is an axis (issue 39): a point per precision, fp32's ids as before, the
// others' ids and command lines naming theirs; a name the CLI would refuse is refused here.
TEST(SweepConfig, PrecisionIsAnAxisOfTrainPoints) {
  const SweepConfig c = parse_sweep_config(
      "name: t\nnodes: [1, 2]\nrepeats: 1\ncluster: {type: local}\ntrain: {models: [{model: lenet, batch: 8}], "
      "precision: [fp32, bf16]}\n", "t.yaml");
  std::vector<std::string> ids;
  for (const auto& p : expand_points(c)) {
    ids.push_back(p.id);
    const auto args = point_args(c, p, "p.json", "log");
    const bool asks = std::find(args.begin(), args.end(), "--precision") != args.end();
    EXPECT_EQ(asks, p.axis("precision") == "bf16") << p.id;
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"train/lenet/b8/n1/none/none", "train/lenet/b8/n2/tcp/none",
                                           "train/lenet/b8/bf16/n1/none/none", "train/lenet/b8/bf16/n2/tcp/none"}));
  EXPECT_EQ(to_json(parse_sweep_config(to_yaml(c), "again.yaml"))["train"]["precision"],
            (nlohmann::json{"fp32", "bf16"}));
  expect_error(local_config("train: {models: [lenet], precision: [fp32, fp8]}\n"),
               {"train.precision", "'fp8' is not one of: fp32, tf32, bf16, fp16"});
  EXPECT_EQ(parse_sweep_config(local_config("train: {models: [lenet], precision: bf16}\n"), "t.yaml").train.axes.of("precision"),
            (std::vector<std::string>{"bf16"}));
}

// `compression:` too (issue 40): N=1 once (one rank sends nothing), every other node count once
// per wire type, the id and the command line naming it.
TEST(SweepConfig, CompressionIsAnAxisOfTrainPoints) {
  const SweepConfig c = parse_sweep_config(
      "name: t\nnodes: [1, 2]\nrepeats: 1\ncluster: {type: local}\ntrain: {models: [{model: lenet, batch: 8}], "
      "compression: [none, fp16]}\n", "t.yaml");
  std::vector<std::string> ids;
  for (const auto& p : expand_points(c)) {
    ids.push_back(p.id);
    const auto args = point_args(c, p, "p.json", "log");
    const auto it = std::find(args.begin(), args.end(), "--compression");
    EXPECT_EQ(it == args.end() ? "auto" : *(it + 1), p.axis("compression")) << p.id;
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"train/lenet/b8/n1/none/none", "train/lenet/b8/wire-none/n2/tcp/none",
                                           "train/lenet/b8/wire-fp16/n2/tcp/none"}));
  expect_error(local_config("train: {models: [lenet], compression: [int8]}\n"),
               {"train.compression", "'int8' is not one of: auto, none, fp16, bf16"});
}

// The tuning knobs as train lists (issue 40): every combination once at N >= 2, N=1 once at the
// defaults (one rank sends nothing), values in canonical form in ids and flags, bounds checked,
// and config.yaml reading back the same lists.
TEST(SweepConfig, TuningKnobsAreAxesOfTrainPoints) {
  const SweepConfig c = parse_sweep_config(
      "name: t\nnodes: [1, 2]\nrepeats: 1\ncluster: {type: local}\ntrain: {models: [{model: lenet, batch: 8}], "
      "fusion_mb: [4, 25.0], first_bucket_mb: 0.25, segment: [256K, 1048576], sockets_per_peer: 3}\n", "t.yaml");
  std::vector<std::string> ids;
  for (const auto& p : expand_points(c)) {
    ids.push_back(p.id);
    if (p.nodes == 1) continue;
    const auto args = point_args(c, p, "p.json", "log");
    const auto flag = [&](const std::string& f) {
      const auto it = std::find(args.begin(), args.end(), f);
      return it == args.end() ? std::string("absent") : *(it + 1);
    };
    EXPECT_EQ(flag("--fusion-mb"), p.axis("fusion_mb") == "25" ? "absent" : p.axis("fusion_mb")) << p.id;
    EXPECT_EQ(flag("--first-bucket-mb"), "0.25") << p.id;
    EXPECT_EQ(flag("--segment"), p.axis("segment") == "1M" ? "absent" : "256K") << p.id;
    EXPECT_EQ(flag("--sockets-per-peer"), "3") << p.id;
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"train/lenet/b8/n1/none/none",
                                           "train/lenet/b8/fusion4/first0.25/seg256K/sockets3/n2/tcp/none",
                                           "train/lenet/b8/fusion4/first0.25/sockets3/n2/tcp/none",
                                           "train/lenet/b8/first0.25/seg256K/sockets3/n2/tcp/none",
                                           "train/lenet/b8/first0.25/sockets3/n2/tcp/none"}));
  const nlohmann::json again = to_json(parse_sweep_config(to_yaml(c), "again.yaml"))["train"];
  EXPECT_EQ(again["fusion_mb"], (nlohmann::json{4.0, 25.0}));
  EXPECT_EQ(again["segment"], (nlohmann::json{"256K", "1M"}));
  EXPECT_EQ(again["sockets_per_peer"], 3);
  expect_error(local_config("train: {models: [lenet], fusion_mb: [1, -1]}\n"), {"train.fusion_mb: must be from 0 to"});
  expect_error(local_config("train: {models: [lenet], segment: 1K}\n"), {"train.segment: must be from 4K to 1G"});
  expect_error(local_config("train: {models: [lenet], segment: lots}\n"), {"train.segment: 'lots' is not a byte count"});
  expect_error(local_config("train: {models: [lenet], sockets_per_peer: 2.5}\n"), {"train.sockets_per_peer: must be a whole"});
  expect_error(local_config("train: {models: [lenet], fusion_mb: [4, 4.0]}\n"), {"train.fusion_mb: 4.0 is listed twice"});
  expect_error(local_config("train: {models: [lenet], fusion_mb: [[4]]}\n"), {"train.fusion_mb[0]: must be a value"});
}

// Real data as an axis (issue 42): `data: [synthetic, jpeg]` makes a point of each, the jpeg
// ones (and only they) get train.data_dir, data_threads is an axis of its own, and jpeg without
// a data_dir is an error naming the key.
TEST(SweepConfig, DataAndItsThreadsAreAxesOfTrainPoints) {
  const SweepConfig c = parse_sweep_config(
      "name: t\nnodes: [2]\nrepeats: 1\ncluster: {type: local}\ntrain: {models: [{model: mobilenet_v1, batch: 8, "
      "image_size: 128}], data: [synthetic, jpeg], data_threads: [2, 4], data_dir: /srv/imagenet-like}\n",
      "t.yaml");
  std::vector<std::string> ids;
  for (const auto& p : expand_points(c)) {
    ids.push_back(p.id);
    const auto args = point_args(c, p, "p.json", "log");
    const auto flag = [&](const std::string& f) {
      const auto it = std::find(args.begin(), args.end(), f);
      return it == args.end() ? std::string("absent") : *(it + 1);
    };
    const bool jpeg = p.axis("data") == "jpeg";
    EXPECT_EQ(flag("--data"), jpeg ? "jpeg" : "absent") << p.id;
    EXPECT_EQ(flag("--data-dir"), jpeg ? "/srv/imagenet-like" : "absent") << p.id;
    EXPECT_EQ(flag("--data-threads"), p.axis("data_threads") == "2" ? "absent" : "4") << p.id;
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"train/mobilenet_v1/b8/s128/n2/tcp/none",
                                           "train/mobilenet_v1/b8/s128/dthreads4/n2/tcp/none",
                                           "train/mobilenet_v1/b8/s128/data-jpeg/n2/tcp/none",
                                           "train/mobilenet_v1/b8/s128/data-jpeg/dthreads4/n2/tcp/none"}));
  const nlohmann::json again = to_json(parse_sweep_config(to_yaml(c), "again.yaml"))["train"];
  EXPECT_EQ(again["data"], (nlohmann::json{"synthetic", "jpeg"}));
  EXPECT_EQ(again["data_dir"], "/srv/imagenet-like");
  expect_error(local_config("train: {models: [lenet], data: [synthetic, jpeg]}\n"), {"train.data: jpeg needs train.data_dir"});
  expect_error(local_config("train: {models: [lenet], data: imagenet}\n"), {"train.data", "'imagenet' is not one of"});
  expect_error(local_config("train: {models: [lenet], data_threads: 0}\n"), {"train.data_threads: must be a whole number from 1 to 256"});
  expect_error(local_config("train: {models: [lenet], data: jpeg, data_dir: ''}\n"), {"train.data_dir: must not be empty"});
}

// `settings:` (ringbench tune's candidates): exactly these combinations, in order, an axis a
// setting leaves out at its list's first value; written back to config.yaml and read again.
TEST(SweepConfig, SettingsAreExactlyTheCombinationsRun) {
  const SweepConfig c = parse_sweep_config(
      "name: t\nnodes: [2]\nrepeats: 1\ncluster: {type: local}\ntrain: {models: [{model: lenet, batch: 8}], "
      "compression: [none], settings: [{fusion_mb: 4, compression: fp16}, {segment: 256K}]}\n", "t.yaml");
  std::vector<std::string> ids;
  for (const auto& p : expand_points(c)) ids.push_back(p.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"train/lenet/b8/wire-fp16/fusion4/n2/tcp/none",
                                           "train/lenet/b8/wire-none/seg256K/n2/tcp/none"}));
  std::vector<std::string> again;
  for (const auto& p : expand_points(parse_sweep_config(to_yaml(c), "again.yaml"))) again.push_back(p.id);
  EXPECT_EQ(again, ids);
  expect_error(local_config("train: {models: [lenet], settings: [{fusion_mb: [1, 2]}]}\n"),
               {"train.settings[0].fusion_mb: a setting takes one value"});
  expect_error(local_config("train: {models: [lenet], settings: [{fusion: 1}]}\n"), {"train.settings[0].fusion: unknown key"});
  expect_error(local_config("train: {models: [lenet], settings: [{fusion_mb: 1}, {fusion_mb: 1.0}]}\n"),
               {"train.settings[1]: repeats an earlier setting"});
}

TEST(SweepConfig, ProfilesAndSharingExpand) {
  const SweepConfig c = parse_sweep_config(R"(
name: t
nodes: [1, 2]
repeats: 1
profiles: [T4-4C, T4-16C, bare-metal]
sharing: {vms_per_gpu: 2, policy: [best_effort, fixed_share], slice_ms: 5}
cluster: {type: local}
train: {models: [lenet]}
collectives: {}
)", "test.yaml");
  EXPECT_EQ(c.sharing.slice_ms, 5);
  const auto points = expand_points(c);
  std::vector<std::string> ids;
  for (const auto& p : points) ids.push_back(p.id + (p.skip.empty() ? "" : " (skip)"));
  const std::vector<std::string> want = {
      "train/lenet/b32/n1/none/T4-4C", "train/lenet/b32/n2/tcp/T4-4C", "collectives/n2/tcp/none",
      "share/lenet/b32/T4-4C/best_effort/vms1", "share/lenet/b32/T4-4C/best_effort/vms2",
      "share/lenet/b32/T4-4C/fixed_share/vms1", "share/lenet/b32/T4-4C/fixed_share/vms2",
      "train/lenet/b32/n1/none/T4-16C", "train/lenet/b32/n2/tcp/T4-16C",
      "share/lenet/b32/T4-16C/best_effort/vms1", "share/lenet/b32/T4-16C/best_effort/vms2 (skip)",
      "share/lenet/b32/T4-16C/fixed_share/vms1", "share/lenet/b32/T4-16C/fixed_share/vms2 (skip)",
      "train/lenet/b32/n1/none/bare-metal", "train/lenet/b32/n2/tcp/bare-metal"};
  EXPECT_EQ(ids, want);
  const auto& skipped = points[10];
  EXPECT_NE(skipped.skip.find("at most 1"), std::string::npos) << skipped.skip;
  EXPECT_EQ(points[4].vms, 2);
  EXPECT_EQ(points[4].policy, "best_effort");
  EXPECT_EQ(points[4].kind, PointKind::share);
  // A config round-trips through its as-run YAML with the sharing block.
  const SweepConfig again = parse_sweep_config(to_yaml(c), "as-run.yaml");
  EXPECT_EQ(to_json(again), to_json(c));
}

}  // namespace
}  // namespace ringbench

namespace ringbench {
namespace {

// cluster.ranks_per_node and the collectives' `hierarchical` axis (issue 44): points run N x R
// ranks with --ranks-per-node R, the hierarchical ones alternate with the flat ones inside every
// repeat, with --hierarchical alone on their command line; a transport it cannot run over is
// skipped saying why; other sections refuse several ranks per node; config.yaml reads back.
TEST(SweepConfig, RanksPerNodeAndTheHierarchicalAxis) {
  const SweepConfig c = parse_sweep_config(
      "name: t\nnodes: [4]\ntransports: [tcp, shm]\nrepeats: 2\ncluster: {type: local, ranks_per_node: 2}\n"
      "collectives: {hierarchical: [false, true]}\n", "t.yaml");
  EXPECT_EQ(c.cluster.ranks_per_node, 2);
  std::vector<std::string> ids;
  for (const auto& p : expand_points(c)) {
    ids.push_back(p.id + (p.skip.empty() ? "" : " skipped"));
    EXPECT_EQ(point_ranks(c, p), 8);
    const auto args = point_args(c, p, "p.json", "log");
    const auto rpn = std::find(args.begin(), args.end(), "--ranks-per-node");
    ASSERT_NE(rpn, args.end()) << p.id;
    EXPECT_EQ(*(rpn + 1), "2");
    const bool hier = std::find(args.begin(), args.end(), "--hierarchical") != args.end();
    EXPECT_EQ(hier, p.axis("hierarchical") == "true") << p.id;
    if (hier) {
      EXPECT_EQ(std::find(args.begin(), args.end(), "true"), args.end()) << "a flag takes no value";
    }
  }
  EXPECT_EQ(ids, (std::vector<std::string>{
                     "collectives/n4/tcp/none", "collectives/n4/shm/none", "collectives/hier/n4/tcp/none",
                     "collectives/hier/n4/shm/none skipped", "collectives/n4/tcp/none", "collectives/n4/shm/none",
                     "collectives/hier/n4/tcp/none", "collectives/hier/n4/shm/none skipped"}));
  const SweepConfig again = parse_sweep_config(to_yaml(c), "config.yaml");
  EXPECT_EQ(to_yaml(again), to_yaml(c));
  expect_error(local_config("collectives: {hierarchical: [maybe]}\n"),
               {"collectives.hierarchical", "'maybe' is not true or false"});
  expect_error("name: t\ncluster: {type: local, ranks_per_node: 0}\ncollectives: {}\n",
               {"cluster.ranks_per_node"});
  expect_error("name: t\ncluster: {type: local, ranks_per_node: 2}\ninfer: {models: [lenet]}\n",
               {"cluster.ranks_per_node", "train and collectives points only"});
}

// hierarchical and hier_chunk are train axes too (issue 44): a train point of several ranks per
// node runs flat and hierarchical (ids .../hier/...), its chunk passed as --hier-chunk, at one
// node only flat (one rank has nothing to allreduce), a transport that cannot carry it skipped
// saying why; the config reads back.
TEST(SweepConfig, HierarchicalAndItsChunkAreAxesOfTrainPoints) {
  const SweepConfig c = parse_sweep_config(
      "name: t\nnodes: [1, 4]\ntransports: [tcp, shm]\nrepeats: 1\ncluster: {type: local, ranks_per_node: 2}\n"
      "train: {models: [{model: lenet, batch: 8}], settings: [{hierarchical: false}, {hierarchical: true}, "
      "{hierarchical: true, hier_chunk: 0}]}\n", "t.yaml");
  std::vector<std::string> ids;
  for (const auto& p : expand_points(c)) {
    ids.push_back(p.id + (p.skip.empty() ? "" : " skipped: " + p.skip));
    const auto args = point_args(c, p, "p.json", "log");
    EXPECT_EQ(std::find(args.begin(), args.end(), "--hierarchical") != args.end(), p.axis("hierarchical") == "true")
        << p.id;
    const auto chunk = std::find(args.begin(), args.end(), "--hier-chunk");
    EXPECT_EQ(chunk != args.end(), p.axis("hier_chunk") != "4M") << p.id;
    if (chunk != args.end()) {
      EXPECT_EQ(*(chunk + 1), "0");
    }
  }
  EXPECT_EQ(ids, (std::vector<std::string>{
                     "train/lenet/b8/n1/none/none", "train/lenet/b8/n4/tcp/none", "train/lenet/b8/n4/shm/none",
                     "train/lenet/b8/hier/n4/tcp/none",
                     "train/lenet/b8/hier/n4/shm/none skipped: --hierarchical --transport shm: the transport across "
                     "the nodes must reach other hosts (shared memory is already the level within each node)",
                     "train/lenet/b8/hier/chunk0/n4/tcp/none",
                     "train/lenet/b8/hier/chunk0/n4/shm/none skipped: --hierarchical --transport shm: the transport "
                     "across the nodes must reach other hosts (shared memory is already the level within each node)"}));
  const SweepConfig again = parse_sweep_config(to_yaml(c), "config.yaml");
  EXPECT_EQ(to_yaml(again), to_yaml(c));
  expect_error(local_config("train: {models: [lenet], hierarchical: [maybe]}\n"),
               {"train.hierarchical", "'maybe' is not true or false"});
  expect_error(local_config("train: {models: [lenet], hier_chunk: [2G]}\n"), {"train.hier_chunk"});
}

// The collectives' `ops` axis (issue 44): each op is a point whose command is the op itself, ids
// name every op but allreduce (whose points keep the ids they had), an op with no hierarchical
// algorithm is skipped saying why (nccl runs every op: not skipped), config.yaml reads back, and a wrong
// op name is an error naming the value and the known ones.
TEST(SweepConfig, OpsIsAnAxisOfCollectivesPoints) {
  const SweepConfig c = parse_sweep_config(
      "name: t\nnodes: [2]\ntransports: [tcp, nccl]\nrepeats: 1\ncluster: {type: local}\n"
      "collectives: {ops: [allreduce, alltoall], hierarchical: [false, true]}\n", "t.yaml");
  std::vector<std::string> ids;
  for (const auto& p : expand_points(c)) {
    ids.push_back(p.id + (p.skip.empty() ? "" : " skipped: " + p.skip));
    const auto args = point_args(c, p, "p.json", "log");
    ASSERT_FALSE(args.empty());
    EXPECT_EQ(args.front(), p.axis("collective")) << p.id;
    EXPECT_EQ(std::count(args.begin(), args.end(), "alltoall"), p.axis("collective") == "alltoall" ? 1 : 0);
  }
  const std::string no_hier = "--hierarchical: alltoall has no hierarchical algorithm; only allreduce has";
  EXPECT_EQ(ids, (std::vector<std::string>{"collectives/n2/tcp/none", "collectives/n2/nccl/none",
                                           "collectives/hier/n2/tcp/none",
                                           "collectives/hier/n2/nccl/none skipped: " +
                                               hierarchical_unfit(2, 1, *find_backend("nccl")),
                                           "collectives/alltoall/n2/tcp/none", "collectives/alltoall/n2/nccl/none",
                                           "collectives/alltoall/hier/n2/tcp/none skipped: " + no_hier,
                                           "collectives/alltoall/hier/n2/nccl/none skipped: " + no_hier}));
  EXPECT_NE(to_yaml(c).find("ops:"), std::string::npos) << to_yaml(c);
  const SweepConfig again = parse_sweep_config(to_yaml(c), "config.yaml");
  EXPECT_EQ(to_yaml(again), to_yaml(c));
  // Without the key, one allreduce point per (N, transport), with the id it always had.
  const SweepConfig plain = parse_sweep_config("name: t\nnodes: [2]\nrepeats: 1\ncluster: {type: local}\ncollectives: {}\n", "t.yaml");
  ASSERT_EQ(expand_points(plain).size(), 1u);
  EXPECT_EQ(expand_points(plain)[0].id, "collectives/n2/tcp/none");
  EXPECT_EQ(point_args(plain, expand_points(plain)[0], "p.json", "log").front(), "allreduce");
  expect_error(local_config("collectives: {ops: [allreduce, allgathr]}\n"),
               {"collectives.ops", "'allgathr' is not one of: allreduce, allgather, reducescatter, broadcast, alltoall"});
  expect_error(local_config("collectives: {ops: [broadcast, broadcast]}\n"), {"collectives.ops", "listed twice"});
  expect_error(local_config("collectives: {ops: []}\n"), {"collectives.ops", "non-empty list"});
  expect_error(local_config("collectives: {op: [allgather]}\n"), {"collectives", "op"});
}

// collectives: {algo: [...]} measures each of our allreduce's algorithms alone (auto, the
// default, keeps the ids and arguments a sweep without the axis had); the baselines and rd at a
// rank count not a power of two are skipped, saying why.
TEST(SweepConfig, TheAlgoAxisOfCollectives) {
  const SweepConfig c = parse_sweep_config(
      "name: t\nnodes: [3, 4]\ntransports: [tcp, mpi]\nrepeats: 1\ncluster: {type: local}\n"
      "collectives: {algo: [auto, hd, rd]}\n", "t.yaml");
  std::vector<std::string> ids;
  for (const auto& p : expand_points(c)) {
    ids.push_back(p.id + (p.skip.empty() ? "" : " skipped: " + p.skip));
    const auto args = point_args(c, p, "p.json", "log");
    const auto algo = std::find(args.begin(), args.end(), "--algo");
    EXPECT_EQ(algo == args.end(), p.axis("algo") == "auto") << p.id;
    if (algo != args.end()) {
      EXPECT_EQ(*(algo + 1), p.axis("algo"));
    }
  }
  EXPECT_EQ(ids, (std::vector<std::string>{
                     "collectives/n3/tcp/none", "collectives/n3/mpi/none", "collectives/algo-hd/n3/tcp/none",
                     "collectives/algo-hd/n3/mpi/none skipped: mpi chooses its own algorithm (algo hd is our allreduce's)",
                     "collectives/algo-rd/n3/tcp/none skipped: rd needs a power-of-two number of ranks, not 3",
                     "collectives/algo-rd/n3/mpi/none skipped: mpi chooses its own algorithm (algo rd is our allreduce's)",
                     "collectives/n4/tcp/none", "collectives/n4/mpi/none", "collectives/algo-hd/n4/tcp/none",
                     "collectives/algo-hd/n4/mpi/none skipped: mpi chooses its own algorithm (algo hd is our allreduce's)",
                     "collectives/algo-rd/n4/tcp/none",
                     "collectives/algo-rd/n4/mpi/none skipped: mpi chooses its own algorithm (algo rd is our allreduce's)"}));
  expect_error(local_config("collectives: {algo: [fast]}\n"), {"collectives.algo", "'fast' is not one of: auto, ring, hd, direct, rd"});
}

}  // namespace
}  // namespace ringbench
