#include "runner/tune/tune_model.h"

#include <algorithm>
#include <cmath>

#include "base/bytes.h"
#include "runner/sweep/sweep_config.h"

namespace ringbench::tune {
namespace {

constexpr double kRingDefaultSegment = 1 << 20;  // collectives/ring_allreduce.h's segment_bytes

// Gradients cross in 2 bytes with fp16 or bf16 compression, or with auto at a 16-bit precision.
double wire_bytes(double bytes, const std::vector<std::string>& axes) {
  const std::string& c = axes[axis_index("compression")];
  const std::string& p = axes[axis_index("precision")];
  const bool half = c == "fp16" || c == "bf16" || (c == "auto" && (p == "fp16" || p == "bf16"));
  return half ? bytes / 2 : bytes;
}

double knob_bytes(const std::vector<std::string>& axes, const char* key) {
  return std::stod(axes[axis_index(key)]) * double(1 << 20);
}

int off_default(const std::vector<std::string>& axes) {
  int n = 0;
  for (const auto& k : modelled_knobs()) n += axes[axis_index(k)] != sweep_axes()[axis_index(k)].default_value;
  return n;
}

}  // namespace

const std::vector<std::string>& modelled_knobs() {
  static const std::vector<std::string> knobs = [] {
    std::vector<std::string> k;
    for (const Axis& a : sweep_axes())
      if (a.tuned) k.push_back(a.key);
    return k;
  }();
  return knobs;
}

AllreduceCost ring_cost(const predict::CostFit& fit, int nodes) {
  return [fit, nodes](double bytes, double segment) {
    const double chunk = bytes / nodes;
    const double extra = std::max(0.0, std::ceil(chunk / segment) - std::ceil(chunk / kRingDefaultSegment));
    return fit.seconds(nodes, bytes) + 2.0 * (nodes - 1) * extra * fit.alpha_s;
  };
}

std::vector<predict::BucketTiming> rebucket(const std::vector<predict::BucketTiming>& tensors, double first_bytes,
                                            double fusion_bytes) {
  std::vector<predict::BucketTiming> out;
  bool open = false;
  for (const auto& t : tensors) {
    if (!open) out.push_back({0, 0}), open = true;
    out.back().bytes += t.bytes;
    out.back().ready_s = std::max(out.back().ready_s, t.ready_s);
    const double cap = out.size() == 1 ? first_bytes : fusion_bytes;
    if (fusion_bytes == 0 || out.back().bytes >= cap) open = false;
  }
  return out;
}

std::vector<Ranked> rank_settings(const predict::StepTimeline& unfused, const AxisLists& space,
                                  const AllreduceCost& cost, const CpuTerm& cpu) {
  // The search space: the modelled knobs' lists; every other axis at its first listed value.
  AxisLists knobs;
  for (size_t i : axes_of(PointKind::train)) knobs.values[i] = {space.values[i].front()};
  for (const auto& k : modelled_knobs()) knobs.values[axis_index(k)] = space.of(k);
  std::vector<std::vector<std::string>> settings;
  for_each_axis_combo(knobs, PointKind::train, [&](const std::vector<std::string>& v) { settings.push_back(v); });
  std::vector<std::string> defaults = settings.front();
  for (const auto& k : modelled_knobs()) defaults[axis_index(k)] = sweep_axes()[axis_index(k)].default_value;
  if (std::find(settings.begin(), settings.end(), defaults) == settings.end()) settings.push_back(defaults);

  std::vector<Ranked> ranked;
  for (const auto& axes : settings) {
    predict::StepTimeline t = unfused;
    t.buckets = rebucket(unfused.buckets, knob_bytes(axes, "first_bucket_mb"), knob_bytes(axes, "fusion_mb"));
    const double segment = double(parse_bytes(axes[axis_index("segment")]));
    const auto p = predict::simulate_step(t, [&](double b) { return cost(wire_bytes(b, axes), segment); });
    Ranked r{axes, p.step_s, p.exposed_s};
    r.is_default = axes == defaults;
    for (const auto& b : t.buckets) r.wire_bytes += wire_bytes(b.bytes, axes);
    r.link_step_s = p.step_s;
    r.cpu_charge_s = cpu.charge_s(r.wire_bytes);
    r.core_step_s = t.compute_s + t.optimizer_s + r.cpu_charge_s;
    r.step_s = std::max(r.link_step_s, r.core_step_s);
    ranked.push_back(r);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    return a.step_s != b.step_s ? a.step_s < b.step_s : off_default(a.axes) < off_default(b.axes);
  });
  return ranked;
}

std::vector<Ranked> candidates(const std::vector<Ranked>& ranked, int k, double tie) {
  const size_t want = std::min<size_t>(size_t(std::max(k, 0)), ranked.size());
  std::vector<Ranked> out;
  std::vector<bool> taken(ranked.size(), false);
  auto take = [&](size_t i) {
    out.push_back(ranked[i]);
    taken[i] = true;
  };
  // Among the near ties, a fusion_mb not yet taken first; then the next best.
  const size_t fusion = axis_index("fusion_mb");
  auto fusion_new = [&](const Ranked& r) {
    return std::none_of(out.begin(), out.end(), [&](const Ranked& o) { return o.axes[fusion] == r.axes[fusion]; });
  };
  while (out.size() < want) {
    size_t pick = ranked.size();
    for (size_t i = 0; i < ranked.size() && pick == ranked.size(); ++i)
      if (!taken[i] && ranked[i].step_s <= ranked.front().step_s * (1 + tie) && fusion_new(ranked[i])) pick = i;
    for (size_t i = 0; i < ranked.size() && pick == ranked.size(); ++i)
      if (!taken[i]) pick = i;
    take(pick);
  }
  if (std::none_of(out.begin(), out.end(), [](const Ranked& r) { return r.is_default; }))
    for (const auto& r : ranked)
      if (r.is_default) out.push_back(r);
  return out;
}

const char* const kIssueGrid =
    "fusion_mb: [1, 4, 16, 64], first_bucket_mb: [0.25, 1, 4], compression: [none, fp16], segment: [256K, 1M, 4M]";

AxisLists issue_grid() {
  return parse_sweep_config(std::string("name: grid\nnodes: [2]\ncluster: {type: local}\ntrain: {models: [lenet], ") +
                                kIssueGrid + "}\n",
                            "the issue's grid")
      .train.axes;
}

std::string setting_text(const std::vector<std::string>& axes) {
  std::string s;
  for (const auto& k : modelled_knobs()) s += (s.empty() ? "" : ", ") + k + " " + axes[axis_index(k)];
  return s;
}

std::string probe_max_bytes(const std::vector<predict::StepTimeline>& unfused) {
  double gradient = 0;
  for (const auto& t : unfused) {
    double sum = 0;
    for (const auto& b : t.buckets) sum += b.bytes;
    gradient = std::max(gradient, sum);
  }
  if (gradient <= 0) return "64M";
  size_t max = size_t{1} << 20;  // 1M, 4M, 16M, 64M: the probe's sizes from 4K by 4
  while (double(max) < gradient && max < (size_t{64} << 20)) max *= 4;
  return std::to_string(max >> 20) + "M";
}

}  // namespace ringbench::tune
