#include "runner/predict/hierarchical.h"

#include <cstdio>
#include <map>
#include <set>

#include "runner/analysis/format.h"
#include "runner/predict/model_check.h"
#include "runner/record/axes.h"
#include "runner/record/point.h"

namespace ringbench::predict {
namespace {

bool is_hierarchical(const report::Point& p) { return p.axes[axis_index("hierarchical")] == "true"; }

std::string fixed(double v, int digits) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

std::string size_text(uint64_t b) {
  if (b >= (uint64_t{1} << 20) && b % (uint64_t{1} << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

// The flat ring's fit at exactly N = `ranks` (not the one over every N).
const TransportFit* flat_ring_fit(const std::vector<TransportFit>& fits, const std::string& transport, int ranks) {
  for (const auto& f : fits)
    if (f.transport == transport && f.nodes == ranks && f.fit.algo == "ring") return &f;
  return nullptr;
}

// The allreduce points of several nodes, flat or hierarchical, by (transport, nodes).
using ByNodes = std::map<std::pair<std::string, int>, const report::Point*>;
void allreduce_points(const report::Run& run, ByNodes& flat, ByNodes& hier) {
  for (const report::Point* p : report::points_of(run, PointKind::collectives))
    if (p->nodes > 1 && report::is_allreduce_point(*p)) (is_hierarchical(*p) ? hier : flat)[{p->transport, p->nodes}] = p;
}

std::vector<CostSample> median_times(const report::Point& p, int per_node) {
  std::vector<CostSample> out;
  for (const auto& [bytes, s] : p.sizes)
    if (!s.time_us.empty()) out.push_back({per_node, double(bytes), report::median(s.time_us) * 1e-6});
  return out;
}

}  // namespace

double hierarchical_seconds(const CostFit& flat, int nodes, double bytes) {
  return nodes < 2 ? 0.0 : flat.seconds(nodes, bytes);  // the ring's terms at M nodes
}

double HierCost::seconds(double bytes) const {
  return hierarchical_seconds(across, nodes, bytes) + (within ? within->seconds(per_node, bytes) : 0.0);
}

std::optional<CostFit> fit_within(const CostFit& across, int nodes, int per_node,
                                  const std::vector<CostSample>& hier_times) {
  std::vector<CostSample> beyond;
  std::set<double> sizes;
  for (const auto& s : hier_times)
    if (const double rest = s.seconds - hierarchical_seconds(across, nodes, s.bytes); rest > 0) {
      beyond.push_back({per_node, s.bytes, rest});
      sizes.insert(s.bytes);
    }
  if (sizes.size() < 2) return std::nullopt;
  return fit_cost("ring", beyond);
}

std::vector<HierCost> hierarchical_costs(const report::Run& run, const std::vector<TransportFit>& fits) {
  const int per_node = report::ranks_per_node(run);
  std::vector<HierCost> out;
  if (per_node < 2) return out;
  ByNodes flat, hier;
  allreduce_points(run, flat, hier);
  for (const auto& [key, p] : flat) {
    const TransportFit* f = flat_ring_fit(fits, key.first, key.second * per_node);
    if (!f) continue;
    HierCost c{key.first, key.second, per_node, f->fit, std::nullopt};
    if (const auto h = hier.find(key); h != hier.end())
      c.within = fit_within(c.across, c.nodes, per_node, median_times(*h->second, per_node));
    out.push_back(std::move(c));
  }
  return out;
}

const HierCost* find_cost(const std::vector<HierCost>& costs, const std::string& transport, int nodes) {
  for (const auto& c : costs)
    if (c.transport == transport && c.nodes == nodes) return &c;
  return nullptr;
}

std::vector<HierPrediction> predict_hierarchical(const report::Run& run, const std::vector<TransportFit>& fits) {
  std::vector<HierPrediction> out;
  ByNodes flat, hier;
  allreduce_points(run, flat, hier);
  for (const HierCost& c : hierarchical_costs(run, fits)) {
    const report::Point& p = *flat.at({c.transport, c.nodes});
    const auto h = hier.find({c.transport, c.nodes});
    HierPrediction hp{c, {}};
    for (const auto& [bytes, s] : p.sizes) {
      if (s.busbw.empty() || *s.algos.begin() != "ring") continue;
      HierRow row{bytes, c.across.seconds(c.nodes * c.per_node, double(bytes)),
                  hierarchical_seconds(c.across, c.nodes, double(bytes)), std::nullopt, report::median(s.busbw), 0};
      if (c.within) row.hier_model_s = c.seconds(double(bytes));
      if (h != hier.end())
        if (auto hs = h->second->sizes.find(bytes); hs != h->second->sizes.end() && !hs->second.busbw.empty())
          row.hier_busbw = report::median(hs->second.busbw);
      hp.rows.push_back(row);
    }
    out.push_back(std::move(hp));
  }
  return out;
}

namespace {

std::string within_text(const HierCost& c) {
  if (!c.within)
    return "The level within the node is not modelled (the run has no hierarchical point to fit it on): the "
           "prediction is an upper bound.";
  return "The level within the node, fitted on what the hierarchical points took beyond the level across: " +
         std::to_string(2 * (c.per_node - 1)) + " alpha_node + " + std::to_string(2 * (c.per_node - 1)) + "/" +
         std::to_string(c.per_node) + " B beta_node, alpha_node " + fixed(c.within->alpha_s * 1e6, 1) +
         " us, beta_node " + fixed(c.within->beta_s * 1e9, 3) + " ns/B, r2 " + fixed(c.within->r2, 3) +
         " (a fit on those same points, not a prediction of them; train points are priced with it).";
}

}  // namespace

std::string md_hierarchical(const std::vector<HierPrediction>& predictions) {
  std::string md;
  for (const auto& hp : predictions) {
    const HierCost& c = hp.cost;
    const int n = c.nodes * c.per_node;
    md += "### " + c.transport + ", " + std::to_string(c.nodes) + " nodes x " + std::to_string(c.per_node) +
          " ranks: hierarchical vs the flat " + std::to_string(n) + "-rank ring\n\n";
    md += "Fitted on the flat ring's sizes: alpha " + fixed(c.across.alpha_s * 1e6, 1) + " us, beta " +
          fixed(c.across.beta_s * 1e9, 3) + " ns/B (" + fixed(c.across.beta_s > 0 ? 1e-9 / c.across.beta_s : 0, 3) +
          " GB/s), r2 " + fixed(c.across.r2, 3) + ". Predicted: the flat ring " + std::to_string(2 * (n - 1)) +
          " alpha + " + std::to_string(2 * (n - 1)) + "/" + std::to_string(n) + " B beta; hierarchical, across the "
          "nodes only, " + std::to_string(2 * (c.nodes - 1)) + " alpha + " + std::to_string(2 * (c.nodes - 1)) +
          "/" + std::to_string(c.nodes) + " B beta (the predicted hier/flat column: an upper bound). " +
          within_text(c) + "\n\n";
    md += "| size | flat busbw GB/s | hier busbw GB/s | measured hier/flat | predicted hier/flat | measured vs predicted |";
    md += c.within ? " both levels hier/flat |\n|---:|---:|---:|---:|---:|---:|---:|\n" : "\n|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& r : hp.rows) {
      const bool measured = r.hier_busbw > 0;
      md += "| " + size_text(r.bytes) + " | " + fixed(r.flat_busbw, 3) + " | " +
            (measured ? fixed(r.hier_busbw, 3) : "not measured") + " | " +
            (measured ? fixed(r.measured_ratio(), 3) + "x" : "-") + " | " + fixed(r.predicted_ratio(), 3) + "x | " +
            (measured ? fixed((r.measured_ratio() / r.predicted_ratio() - 1) * 100, 1) + "%" : "-") + " |";
      if (c.within) md += " " + fixed(r.flat_predicted_s / *r.hier_model_s, 3) + "x |";
      md += "\n";
    }
    md += "\n";
  }
  return md;
}

std::string md_hierarchical_training(const ModelCheck& mc) {
  std::string md;
  for (const auto& r : mc.rows) {
    if (!r.predicted_hier_s) continue;
    const double images = double(r.ranks) * r.point->batch;
    md += "| " + report::label(*r.point, true) + " | " + std::to_string(r.ranks) + " | " + fixed(r.measured_s * 1e3, 1) +
          " | " + fixed(r.predicted_s * 1e3, 1) + " (" + fixed(r.error() * 100, 1) + "%) | " +
          fixed(*r.predicted_hier_s * 1e3, 1) + " | " + fixed(images / r.measured_s, 1) + " | " +
          fixed(images / *r.predicted_hier_s, 1) + " | " + fixed(r.predicted_s / *r.predicted_hier_s, 3) + "x | " +
          r.hier_fit + " |\n";
  }
  if (md.empty()) return "";
  return "Each train point of several ranks per node ran the flat ring; its step replayed with the hierarchical "
         "allreduce's cost instead (both levels where the run fitted the one within the node, else across only: an "
         "upper bound). img/s = ranks x batch / step. The gain is a prediction: these points did not "
         "train hierarchically.\n\n| point | ranks | measured step ms | predicted flat step ms (error) | predicted hier step ms | "
         "measured img/s | predicted hier img/s | predicted gain | hier cost |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|---|\n" +
         md + "\n";
}

}  // namespace ringbench::predict
