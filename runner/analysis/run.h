// A run's points and what is derived from them: the records grouped by point (the last of each
// (point, repeat) wins), the statistics over repeats and across points (scaling efficiency,
// ratio vs tcp), the report's order, and how points are named in tables and plots.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "runner/analysis/records.h"
#include "runner/analysis/stats.h"

namespace ringbench::report {

struct Straggler {
  int repeat = 0, rank = 0;
  std::string host;
  double median_s = 0, ranks_median_s = 0;
};

struct SizeStats {
  std::set<std::string> algos;
  std::vector<double> time_us, busbw;
  std::vector<double> cpu_us;  // the ranks' mean CPU time per iteration (rows since tune's CPU term)
  uint64_t wrong = 0;
  bool checked = false;
};

struct WrongResult {
  int repeat = 0;
  uint64_t bytes = 0, wrong = 0;
  bool inplace = false;
};

// Whether two points' axis values agree on every axis but the communication ones.
bool same_axes_but_communication(const std::vector<std::string>& a, const std::vector<std::string>& b);
// A key sorting points by their axis values: each axis's default first, then the others in
// their natural order (numbers by size), the first axis most significant.
std::vector<std::tuple<bool, double, std::string>> axes_order(const std::vector<std::string>& values);

struct Point : PointCoords {
  std::string id;
  int profile_order = -1;       // the profile's place in the sweep's order ("none": -1)
  std::vector<Record> repeats;  // by repeat number

  // kind train and share, over the ok repeats (share: the VMs' sum, step s mean over VMs)
  std::map<int, double> total;  // total img/s by repeat (infer: Offline samples/s at the largest batch)
  std::vector<double> per_rank;
  std::optional<double> step_s, compute_s, exposed_s, allreduce_s, optimizer_s, hidden;
  std::optional<double> cpus_busy;  // CPUs a rank kept busy (train runs since it was measured)
  // Real data (--data jpeg): seconds per step a rank waited for its input pipeline, and the
  // CPUs the pipeline's threads kept busy (part of cpus_busy).
  std::optional<double> input_stall_s, input_cpus;
  std::optional<MeanCi> efficiency, ratio_vs_tcp;
  std::string efficiency_na;  // why there is no efficiency
  std::vector<Straggler> stragglers;

  // kind collectives, out-of-place rows of the ok repeats by size; wrong results of all rows
  std::map<uint64_t, SizeStats> sizes;
  std::vector<WrongResult> wrong;

  // vGPU: the device memory peak (train: rank 0's; share: the VMs'), largest over the ok repeats
  std::optional<double> memory_peak_mib;
  // kind share, over the ok repeats: img/s per VM and step s by repeat, device utilization
  std::map<int, double> per_vm;
  std::optional<double> util_per_vm, util_total;

  std::vector<const Record*> ok() const {
    std::vector<const Record*> v;
    for (const auto& r : repeats)
      if (r.status == "ok") v.push_back(&r);
    return v;
  }
  int count(const std::string& status) const {
    return int(std::count_if(repeats.begin(), repeats.end(),
                             [&](const Record& r) { return r.status == status; }));
  }
  // ok: every repeat ran; skipped: none was attempted; does_not_fit: no repeat fit the
  // profile's framebuffer; failed: anything else.
  std::string status() const {
    const int n = int(repeats.size());
    return count("ok") == n             ? "ok"
           : count("skipped") == n      ? "skipped"
           : count("does_not_fit") == n ? "does_not_fit"
                                        : "failed";
  }
  bool same_config(const Point& o) const {
    return axes == o.axes && kind == o.kind && model == o.model && batch == o.batch && image_size == o.image_size &&
           profile == o.profile;
  }
  // Points that differ only in communication axes (the gradients' wire type, fusion, ...; and
  // node count, transport) share an N=1 baseline: one rank sends nothing.
  bool same_config_but_wire(const Point& o) const {
    return kind == o.kind && model == o.model && batch == o.batch && image_size == o.image_size &&
           profile == o.profile && same_axes_but_communication(axes, o.axes);
  }
};

// A collectives point that timed allreduce (the `ops` axis's default): what the alpha-beta fits
// and the hierarchical model read; the other collectives move other amounts and are not mixed in.
inline bool is_allreduce_point(const Point& p) {
  return p.kind == PointKind::collectives && p.axis("collective") == "allreduce";
}

// Backends in their registered order; none and anything else after, alphabetically.
int transport_rank(const std::string& t);

int policy_rank(const std::string& policy);

// Train, then share, then infer, then collectives; profiles in the sweep's order.
inline auto order_key(const Point& p) {
  const int kind = p.kind == PointKind::train ? 0 : p.kind == PointKind::share ? 1 : p.kind == PointKind::infer ? 2 : 3;
  return std::tuple(kind, p.kind, p.model, p.batch, p.image_size, axes_order(p.axes), p.profile_order, p.profile, policy_rank(p.policy), p.policy,
                    p.vms, p.nodes, transport_rank(p.transport), p.transport, p.id);
}

struct Run {
  std::string sweep, run_id;
  json cluster;
  std::vector<std::string> started;  // every started_at, sorted
  std::vector<Point> points;         // in report order
};

// Reads RUN_DIR/raw.jsonl and derives every point's statistics.
Run load_run(const std::string& run_dir, double straggler_margin);

// The rank 0 section ("train" or "collectives") of a record.
const json* section(const Record& r);

std::string host_of(const Record& r, int rank);

// num[r] / den[r] / scale for every repeat r of num; den's median where den lacks repeat r.
std::vector<double> paired(const std::map<int, double>& num, const std::map<int, double>& den,
                           double scale);

// The point of `points` with p's config at `nodes` and `transport`, or null.
const Point* find_peer(const std::vector<Point>& points, const Point& p, int nodes,
                       const std::string& transport);

// Each sweep axis off its default, each after `separator`: " bf16 wire fp16 fusion MiB 4" (labels),
// ", bf16, --compression fp16, --fusion-mb 4" (`flags`: options as train takes them).
std::string axes_label(const Point& p, const std::string& separator, bool flags);

// " b32", " b32 224px", " b8 bf16 wire fp16".
std::string batch_suffix(const Point& p);

// " b32 224px" where a model has several (batch, image size), and the profile if any.
std::string config_suffix(const Point& p, bool with_config);

// "lenet n2 tcp", plus the config suffix.
std::string label(const Point& p, bool with_config);

// What a point without results says in a table: skipped, does not fit or failed.
std::string not_ok_text(const Point& p);

std::string vms_text(int vms);

// Models trained with more than one (batch, image size).
std::set<std::string> multi_config_models(const Run& run);

std::vector<const Point*> points_of(const Run& run, PointKind kind);

// The cluster's ranks per node (cluster.ranks_per_node; 1 where the records do not say).
int ranks_per_node(const Run& run);
// A point's ranks: its nodes times the ranks per node.
inline int ranks_of(const Run& run, const Point& p) { return p.nodes * ranks_per_node(run); }

bool has_share(const Run& run);

// A run with a vGPU profile other than none or with share points. Only such a run gets the
// vGPU columns, section and definitions: the report of a run without them reads as before.
bool has_vgpu(const Run& run);

// How a record's profile was applied: {mode, message, framebuffer_mib, detected}; a does-not-fit
// record has it at the top level, an ok one in its section's meta.
const json* vgpu_of(const Record& r);

// The first record of a point that says how its profile was applied.
const json* vgpu_of(const Point& p);

// The framebuffer a record ran with, in MiB (none: the whole device, or not known).
std::optional<double> framebuffer_of(const Record& r);

std::optional<double> framebuffer_of(const Point& p);

// The share points of one model by sharing row: (profile, policy) in report order, and each
// row's points by number of VMs.
struct ShareRow {
  const Point* first = nullptr;  // any point of the row, for its profile, policy and config
  std::map<int, const Point*> by_vms;
};

std::vector<ShareRow> share_rows(const std::vector<const Point*>& pts);

// The VM counts other than 1 of the share points.
std::set<int> shared_vms(const std::vector<const Point*>& pts);

}  // namespace ringbench::report
