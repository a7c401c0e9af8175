// Sweep configs (YAML): what to run (models × node counts × transports × profiles × repeats,
// and/or an allreduce size sweep) and on which cluster. load_sweep_config() validates the whole
// file before anything runs: every error names the key and what is allowed.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/backends/backend.h"
#include "runner/record/point.h"
#include "runner/sweep/axis_lists.h"
#include "runner/sweep/infer_sweep.h"
#include "runner/sweep/migrate_sweep.h"
#include "runner/sweep/remote_sweep.h"
#include "runner/sweep/vgpu_keys.h"

namespace ringbench {

namespace vgpu {
struct Profile;
}

struct SweepModel {
  std::string model;
  int batch = 32;
  int image_size = 0;  // 0: the model's default
};

struct TrainSweep {
  std::vector<SweepModel> models;
  int warmup = 5, steps = 20;
  bool overlap = true;
  std::string backend = "auto";
  std::string data_dir;  // --data-dir of the points whose data is jpeg or fashion-mnist ("": train's default)
  AxisLists axes;  // precision, compression, fusion_mb, ...: each a value or a list (runner/record/axes.cc)
  // Each point of our ring at N >= 2 runs `train --autotune`: the axes declared `tuned` are
  // chosen per point (and so not listed), and the measured steps run on the choice.
  bool tuned = false;
  int tune_top_k = 3, tune_repeats = 3, tune_steps = 5;  // its --autotune-top-k, -repeats, -steps
};

struct CollectivesSweep {
  std::string min_bytes = "4K", max_bytes = "64M";
  double step_factor = 4;
  int iters = 20, warmup_iters = 5;
  std::string dtype = "float";
  bool check = true;
  AxisLists axes;  // the collectives' own axes, if any are declared (runner/record/axes.cc)
};

struct ClusterConfig {
  std::string type = "local";   // local | emulated | mpirun
  std::string link = "10gbit";  // emulated: tc rate of every node's link
  int cpus_per_node = 0;        // local/emulated: 0 = this machine's cores ÷ the largest node count
  std::vector<std::string> hosts;  // mpirun: ringbench runs mpirun -H hosts itself when given
  double latency_us = 0;  // one-way latency added to the remote device link (remote: links without their own)
  // Ranks on each node, consecutive ranks node by node: a point on N nodes runs N x this ranks,
  // passed --ranks-per-node (shm connects a node's ranks for --hierarchical).
  int ranks_per_node = 1;
};

struct SweepConfig {
  std::string name;
  std::vector<int> nodes{1, 2, 4};
  std::vector<std::string> transports{kBaselineBackend};
  std::vector<std::string> profiles{"none"};  // vGPU profiles (the catalog's names) or "none"
  bool allow_profile_mismatch = false;        // run profiles this VM's real vGPU is not
  std::string vgpu_catalog;                   // "": the built-in catalog
  int repeats = 3;
  uint64_t seed = 42;
  double timeout_s = 600;  // per point
  ClusterConfig cluster;
  bool has_train = false, has_collectives = false, has_sharing = false, has_infer = false, has_migrate = false,
       has_remote = false;
  TrainSweep train;
  InferSweep infer;
  MigrateSweep migrate;
  RemoteSweep remote;
  SharingConfig sharing;
  CollectivesSweep collectives;
};

// The most nodes a local or emulated cluster on one machine may have (the emulated cluster's /24
// holds 253 nodes and its switch). The most points a sweep may have is kMaxPoints (point.h).
constexpr int kMaxLocalNodes = 253;
constexpr int kMaxRanksPerNode = 64;

// The nodes a local or emulated cluster needs: the largest node count, a migration's ranks
// and the node its rank moves to, and the two nodes of a remote link.
int cluster_nodes(const SweepConfig& c);
struct SweepPoint;
// The ranks of a point: its nodes times cluster.ranks_per_node.
int point_ranks(const SweepConfig& c, const SweepPoint& p);

// Parses and validates; throws Error("<file>: <key>: <what is wrong>; <what is allowed>").
// Repeated keys and repeated list entries are errors too.
SweepConfig load_sweep_config(const std::string& path);
SweepConfig parse_sweep_config(const std::string& yaml_text, const std::string& origin);
// The config with every default filled in, as YAML (config.yaml "as run") and as JSON.
std::string to_yaml(const SweepConfig& c);
// What every host of a sweep must agree on: the first 16 hex digits of to_yaml's SHA-256.
std::string config_hash(const SweepConfig& c);
nlohmann::json to_json(const SweepConfig& c);

// One measurement: a training run or an allreduce size sweep on `nodes` ranks.
struct SweepPoint : PointCoords {
  std::string id;         // "train/lenet/b32/n2/tcp/none", "collectives/n4/tcp/none",
                          // "share/lenet/b32/T4-4C/fixed_share/vms4", "infer/lenet/b8/s28/none",
                          // "infer/lenet/b8/T4-4C/best_effort/vms2",
                          // "migrate/mobilenet_v1/b8/s96/n3/tcp/precopy/fb4G" (or .../precopy/T4-4C),
                          // "remote/lenet/b8/partial/k2", "remote/lenet/b8/tcp/10gbit/50us"
  int repeat = 1;         // 1-based
  std::string skip;       // why the config itself rules this point out ("" when it can run)
};

// A point with a model's coordinates (train, infer and share points).
SweepPoint model_point(PointKind kind, const std::string& model, int batch, int image_size, int nodes,
                       const std::string& transport, const std::string& profile, int repeat);
// "/s96" in a point's id when an image size is set.
std::string size_suffix(int image_size);
// Point p (a share or infer point's model coordinates) as one of k VMs sharing a device of
// profile vp under `policy`: its id is id_base + "/<profile>/<policy>/vms<k>", and it is skipped
// where the profile hosts fewer than k vGPUs per GPU.
SweepPoint shared_point(SweepPoint p, const std::string& id_base, const vgpu::Profile& vp, const std::string& policy,
                        int vms);

// Every point in the order run: repeats outermost, so each pass covers every configuration
// and slow drift of a shared machine spreads over all of them; N = 1 runs once per model and
// profile (transport "none"), not once per transport. Collectives, infer and migrate points do
// not depend on the top-level vGPU profiles and run once per repeat (infer and migrate: under
// their own section's profiles).
std::vector<SweepPoint> expand_points(const SweepConfig& c);
// The same points, one at a time, holding none of them (--dry-run streams them).
void for_each_point(const SweepConfig& c, const std::function<void(const SweepPoint&)>& visit);

}  // namespace ringbench
