#include "runner/predict/hierarchical.h"

#include <cstdio>
#include <map>

#include "runner/analysis/format.h"
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

}  // namespace

double hierarchical_seconds(const CostFit& flat, int nodes, double bytes) {
  return nodes < 2 ? 0.0 : flat.seconds(nodes, bytes);  // the ring's terms at M nodes
}

std::vector<HierPrediction> predict_hierarchical(const report::Run& run) {
  const int per_node = report::ranks_per_node(run);
  std::vector<HierPrediction> out;
  if (per_node < 2) return out;
  std::map<std::pair<std::string, int>, const report::Point*> flat, hier;
  for (const report::Point* p : report::points_of(run, PointKind::collectives))
    if (p->nodes > 1 && report::is_allreduce_point(*p))
      (is_hierarchical(*p) ? hier : flat)[{p->transport, p->nodes}] = p;
  for (const auto& [key, p] : flat) {
    std::vector<CostSample> samples;
    for (const auto& [bytes, s] : p->sizes)
      if (s.algos.size() == 1 && *s.algos.begin() == "ring" && !s.time_us.empty())
        samples.push_back({report::ranks_of(run, *p), double(bytes), report::median(s.time_us) * 1e-6});
    if (samples.size() < 2) continue;
    HierPrediction hp{key.first, key.second, per_node, fit_cost("ring", samples), {}};
    const auto h = hier.find(key);
    for (const auto& [bytes, s] : p->sizes) {
      if (s.busbw.empty() || *s.algos.begin() != "ring") continue;
      HierRow row{bytes, hp.flat.seconds(key.second * per_node, double(bytes)),
                  hierarchical_seconds(hp.flat, key.second, double(bytes)), report::median(s.busbw), 0};
      if (h != hier.end())
        if (auto hs = h->second->sizes.find(bytes); hs != h->second->sizes.end() && !hs->second.busbw.empty())
          row.hier_busbw = report::median(hs->second.busbw);
      hp.rows.push_back(row);
    }
    out.push_back(std::move(hp));
  }
  return out;
}

std::string md_hierarchical(const std::vector<HierPrediction>& predictions) {
  std::string md;
  for (const auto& hp : predictions) {
    const int n = hp.nodes * hp.per_node;
    md += "### " + hp.transport + ", " + std::to_string(hp.nodes) + " nodes x " + std::to_string(hp.per_node) +
          " ranks: hierarchical vs the flat " + std::to_string(n) + "-rank ring\n\n";
    md += "Fitted on the flat ring's sizes: alpha " + fixed(hp.flat.alpha_s * 1e6, 1) + " us, beta " +
          fixed(hp.flat.beta_s * 1e9, 3) + " ns/B (" + fixed(hp.flat.beta_s > 0 ? 1e-9 / hp.flat.beta_s : 0, 3) +
          " GB/s), r2 " + fixed(hp.flat.r2, 3) + ". Predicted: the flat ring " + std::to_string(2 * (n - 1)) +
          " alpha + " + std::to_string(2 * (n - 1)) + "/" + std::to_string(n) + " B beta; hierarchical, across the "
          "nodes only, " + std::to_string(2 * (hp.nodes - 1)) + " alpha + " + std::to_string(2 * (hp.nodes - 1)) +
          "/" + std::to_string(hp.nodes) + " B beta (the shared-memory level is not modelled: an upper bound).\n\n";
    md += "| size | flat busbw GB/s | hier busbw GB/s | measured hier/flat | predicted hier/flat | measured vs predicted |\n";
    md += "|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& r : hp.rows) {
      const bool measured = r.hier_busbw > 0;
      md += "| " + size_text(r.bytes) + " | " + fixed(r.flat_busbw, 3) + " | " +
            (measured ? fixed(r.hier_busbw, 3) : "not measured") + " | " +
            (measured ? fixed(r.measured_ratio(), 3) + "x" : "-") + " | " + fixed(r.predicted_ratio(), 3) + "x | " +
            (measured ? fixed((r.measured_ratio() / r.predicted_ratio() - 1) * 100, 1) + "%" : "-") + " |\n";
    }
    md += "\n";
  }
  return md;
}

}  // namespace ringbench::predict
