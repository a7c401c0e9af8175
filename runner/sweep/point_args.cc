#include "runner/sweep/point_args.h"

#include <algorithm>
#include <sstream>

#include "runner/backends/backend.h"
#include "runner/analysis/format.h"

namespace ringbench {
namespace {

// The `ringbench train` options of a train or share point (without --json).
std::vector<std::string> train_args(const SweepConfig& c, const SweepPoint& p) {
  const TrainSweep& t = c.train;
  std::vector<std::string> a = {"--model", p.model, "--batch", std::to_string(p.batch),
                                "--steps", std::to_string(t.steps), "--warmup", std::to_string(t.warmup),
                                "--transport", p.transport == "none" ? kBaselineBackend : p.transport,
                                "--backend", t.backend, "--seed", std::to_string(c.seed)};
  if (p.image_size) a.insert(a.end(), {"--image-size", std::to_string(p.image_size)});
  // A share point trains at each train axis's first listed value.
  std::vector<std::string> values = p.axes;
  if (p.kind != PointKind::train)
    for (size_t i : axes_of(PointKind::train)) values[i] = t.axes.values[i].front();
  for (auto& x : axes_args(PointKind::train, values)) a.push_back(x);
  if (!t.data_dir.empty() && values[axis_index("data")] != "synthetic") a.insert(a.end(), {"--data-dir", t.data_dir});
  if (!t.overlap) a.push_back("--no-overlap");
  if (c.allow_profile_mismatch) a.push_back("--allow-profile-mismatch");
  return a;
}

// tuned: true tunes a train point of our ring at N >= 2 (one rank has nothing to tune; the
// baselines have none of our knobs).
bool tuned_point(const SweepConfig& c, const SweepPoint& p) {
  const Backend* b = find_backend(p.transport);
  return c.train.tuned && p.kind == PointKind::train && p.nodes > 1 && b && b->ring;
}

// An infer point's catalog and mismatch options (a train point's are in train_args and below).
std::vector<std::string> vgpu_args(const SweepConfig& c) {
  std::vector<std::string> a;
  if (!c.vgpu_catalog.empty()) a.insert(a.end(), {"--vgpu-catalog", c.vgpu_catalog});
  if (c.allow_profile_mismatch) a.push_back("--allow-profile-mismatch");
  return a;
}

// `ringbench vgpu share` for a shared point (train's or infer's), up to and with the --.
std::vector<std::string> share_args(const SweepConfig& c, const SweepPoint& p, const std::string& json_path,
                                    const std::string& log_base) {
  // Ahead of the point's own deadline, so the VMs' timeout is what gets recorded.
  const double share_timeout = std::max(0.5 * c.timeout_s, c.timeout_s - 10);
  const SharingConfig& sharing = p.kind == PointKind::share ? c.sharing : c.infer.sharing;
  std::vector<std::string> a = {"vgpu"};
  if (!c.vgpu_catalog.empty()) a.insert(a.end(), {"--vgpu-catalog", c.vgpu_catalog});
  a.insert(a.end(), {"share", "--profile", p.profile, "--vms", std::to_string(p.vms), "--policy", p.policy,
                     "--slice-ms", report::num6(sharing.slice_ms), "--timeout", report::num6(share_timeout), "--json", json_path,
                     "--log-dir", log_base + ".vms", "--"});
  return a;
}

}  // namespace

std::vector<std::string> point_args(const SweepConfig& c, const SweepPoint& p, const std::string& json_path,
                                    const std::string& log_base) {
  if (p.kind == PointKind::remote) return {};  // run_remote_point builds its processes' own
  if (p.kind == PointKind::train) {
    std::vector<std::string> a = {"train"};
    for (auto& x : train_args(c, p)) a.push_back(x);
    if (p.profile != "none") a.insert(a.end(), {"--profile", p.profile});
    if (!c.vgpu_catalog.empty()) a.insert(a.end(), {"--vgpu-catalog", c.vgpu_catalog});
    if (tuned_point(c, p))
      a.insert(a.end(), {"--autotune", "--autotune-top-k", std::to_string(c.train.tune_top_k), "--autotune-repeats",
                         std::to_string(c.train.tune_repeats), "--autotune-steps", std::to_string(c.train.tune_steps),
                         "--autotune-log", log_base + ".autotune.csv"});
    if (c.cluster.ranks_per_node > 1) a.insert(a.end(), {"--ranks-per-node", std::to_string(c.cluster.ranks_per_node)});
    a.insert(a.end(), {"--json", json_path});
    return a;
  }
  if (p.kind == PointKind::migrate) {  // rank_args() append --threads, --iface and --migrate-netns
    std::vector<std::string> a = migrate_args(c.migrate, p, c.seed);
    for (auto& x : vgpu_args(c)) a.push_back(x);
    a.insert(a.end(), {"--json", json_path});
    return a;
  }
  if (p.kind == PointKind::infer && p.vms == 0) {  // one local process; rank_args() append its --threads
    std::vector<std::string> a = infer_args(c.infer, p.model, p.image_size, p.batch, c.seed);
    if (p.profile != "none") a.insert(a.end(), {"--profile", p.profile});
    for (auto& x : vgpu_args(c)) a.push_back(x);
    a.insert(a.end(), {"--json", json_path});
    return a;
  }
  if (p.shared()) {  // the VMs' options last, after --, where rank_args() append
    std::vector<std::string> a = share_args(c, p, json_path, log_base);
    if (p.kind == PointKind::share) {
      for (auto& x : train_args(c, p)) a.push_back(x);
      return a;
    }
    for (auto& x : infer_args(c.infer, p.model, p.image_size, p.batch, c.seed, true)) a.push_back(x);  // "infer", ...
    if (c.allow_profile_mismatch) a.push_back("--allow-profile-mismatch");
    return a;
  }
  const CollectivesSweep& k = c.collectives;
  std::vector<std::string> a = {p.axis("collective"), "-b", k.min_bytes, "-e", k.max_bytes, "-f", report::num6(k.step_factor),
                                "-n", std::to_string(k.iters), "-w", std::to_string(k.warmup_iters),
                                "-c", k.check ? "1" : "0", "-d", k.dtype, "--json", json_path};
  for (auto& x : axes_args(PointKind::collectives, p.axes)) a.push_back(x);
  if (c.cluster.ranks_per_node > 1) a.insert(a.end(), {"--ranks-per-node", std::to_string(c.cluster.ranks_per_node)});
  const Backend* b = find_backend(p.transport);
  if (b && !b->ring) a.insert(a.end(), {"--impl", b->name});
  if (b && b->ring && b->name != kBaselineBackend) a.insert(a.end(), {"--transport", b->name});
  return a;
}

}  // namespace ringbench
