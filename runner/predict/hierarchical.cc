#include "runner/predict/hierarchical.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "base/bytes.h"
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

// The allreduce points of several nodes, flat, hierarchical with the levels one after the other
// (serial) and pipelined, by (transport, nodes).
using ByNodes = std::map<std::pair<std::string, int>, const report::Point*>;
struct AllreducePoints {
  ByNodes flat, serial, pipelined;
  // The hierarchical point the gain is measured on: the pipelined one where there is one.
  const report::Point* hier(const std::pair<std::string, int>& key) const {
    for (const ByNodes* m : {&pipelined, &serial})
      if (auto it = m->find(key); it != m->end()) return it->second;
    return nullptr;
  }
};
AllreducePoints allreduce_points(const report::Run& run) {
  AllreducePoints a;
  for (const report::Point* p : report::points_of(run, PointKind::collectives)) {
    if (p->nodes < 2 || !report::is_allreduce_point(*p)) continue;
    ByNodes& m = !is_hierarchical(*p) ? a.flat : hier_chunk_of(*p) ? a.pipelined : a.serial;
    m[{p->transport, p->nodes}] = p;
  }
  return a;
}

double median_busbw(const report::Point* p, uint64_t bytes) {
  if (!p) return 0;
  const auto s = p->sizes.find(bytes);
  return s == p->sizes.end() || s->second.busbw.empty() ? 0 : report::median(s->second.busbw);
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
  auto across_s = [&](double b) { return hierarchical_seconds(across, nodes, b); };
  auto within_s = [&](double b) { return within ? within->seconds(per_node, b) : 0.0; };
  if (chunk_bytes == 0 || bytes <= double(chunk_bytes)) return across_s(bytes) + within_s(bytes);
  return pipelined_seconds(bytes, double(chunk_bytes), across_s, within_s);
}

// HierarchicalAllreduce::run_pipelined's order: the level within reduce-scatters chunk k, then
// allgathers chunk k-1 once it has crossed; the level across takes chunk k once it is
// reduce-scattered and chunk k-1 has crossed.
double pipelined_seconds(double bytes, double chunk, const std::function<double(double)>& across,
                         const std::function<double(double)>& within) {
  const size_t chunks = size_t(std::ceil(bytes / chunk));
  auto size = [&](size_t k) { return std::min(chunk, bytes - double(k) * chunk); };
  double node = 0, crossed_prev = 0;  // when the level within is free; when chunk k-1 has crossed
  for (size_t k = 0; k < chunks; ++k) {
    node += within(size(k)) / 2;  // reduce-scatter chunk k
    const double crossed = std::max(node, crossed_prev) + across(size(k));
    if (k > 0) node = std::max(node, crossed_prev) + within(size(k - 1)) / 2;  // allgather chunk k-1
    crossed_prev = crossed;
  }
  return std::max(node, crossed_prev) + within(size(chunks - 1)) / 2;
}

size_t hier_chunk_of(const report::Point& p) {
  if (p.kind == PointKind::train)  // a sweep's train records keep the axis, not the meta
    return is_hierarchical(p) ? parse_bytes(p.axes[axis_index("hier_chunk")]) : 0;
  for (const report::Record* r : p.ok())
    if (const auto v = report::number_at(r->j, "/collectives/meta/options/hier_chunk_bytes");
        v && *v >= 1 && *v <= double(size_t{1} << 40))
      return size_t(*v);
  return 0;
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
  const AllreducePoints points = allreduce_points(run);
  for (const auto& [key, p] : points.flat) {
    const TransportFit* f = flat_ring_fit(fits, key.first, key.second * per_node);
    if (!f) continue;
    HierCost c{key.first, key.second, per_node, f->fit, std::nullopt, 0};
    // The level within, where the levels ran one after the other (their times add up there).
    if (const auto s = points.serial.find(key); s != points.serial.end())
      c.within = fit_within(c.across, c.nodes, per_node, median_times(*s->second, per_node));
    if (const auto h = points.pipelined.find(key); h != points.pipelined.end()) c.chunk_bytes = hier_chunk_of(*h->second);
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
  const AllreducePoints points = allreduce_points(run);
  for (const HierCost& c : hierarchical_costs(run, fits)) {
    const std::pair<std::string, int> key{c.transport, c.nodes};
    const report::Point& p = *points.flat.at(key);
    const report::Point* h = points.hier(key);
    const auto serial = points.serial.find(key);
    HierCost across_only = c;
    across_only.within.reset();
    HierPrediction hp{c, {}};
    for (const auto& [bytes, s] : p.sizes) {
      if (s.busbw.empty() || *s.algos.begin() != "ring") continue;
      HierRow row{bytes, c.across.seconds(c.nodes * c.per_node, double(bytes)), across_only.seconds(double(bytes)),
                  std::nullopt, report::median(s.busbw), median_busbw(h, bytes), 0};
      if (c.within) row.hier_model_s = c.seconds(double(bytes));
      if (c.chunk_bytes && serial != points.serial.end()) row.serial_busbw = median_busbw(serial->second, bytes);
      hp.rows.push_back(row);
    }
    out.push_back(std::move(hp));
  }
  return out;
}

namespace {

std::string within_text(const HierCost& c) {
  if (!c.within)
    return std::string("The level within the node is not modelled (the run has no hierarchical point ") +
           (c.chunk_bytes ? "with the levels one after the other, hier_chunk 0, " : "") +
           "to fit it on): the prediction is an upper bound.";
  return "The level within the node, fitted on what the hierarchical points " +
         std::string(c.chunk_bytes ? "with the levels one after the other (hier_chunk 0) " : "") +
         "took beyond the level across: " + std::to_string(2 * (c.per_node - 1)) + " alpha_node + " +
         std::to_string(2 * (c.per_node - 1)) + "/" + std::to_string(c.per_node) + " B beta_node, alpha_node " +
         fixed(c.within->alpha_s * 1e6, 1) + " us, beta_node " + fixed(c.within->beta_s * 1e9, 3) + " ns/B, r2 " +
         fixed(c.within->r2, 3) +
         (c.chunk_bytes ? " (a fit on those points; for the pipelined ones the both-levels column is a prediction, "
                          "not a fit; train points are priced with it)."
                        : " (a fit on those same points, not a prediction of them; train points are priced with it).");
}

std::string pipeline_text(const HierCost& c) {
  if (!c.chunk_bytes) return "The hierarchical points ran the levels one after the other: their times add up. ";
  return "The hierarchical points ran pipelined in chunks of " + size_text(c.chunk_bytes) +
         ": priced as the pipeline's schedule (chunk k across the nodes while chunk k+1 is reduce-scattered and "
         "chunk k-1 allgathered within the node; about K max(across, within) per chunk plus one chunk's "
         "reduce-scatter and allgather; the level across pays its alpha terms once per chunk), assuming the two "
         "levels do not slow each other down. ";
}

std::string ratio_or_dash(double measured, double flat) {
  return measured > 0 ? fixed(measured / flat, 3) + "x" : "-";
}

}  // namespace

std::string md_hierarchical(const std::vector<HierPrediction>& predictions) {
  std::string md;
  for (const auto& hp : predictions) {
    const HierCost& c = hp.cost;
    const int n = c.nodes * c.per_node;
    const bool serial = std::any_of(hp.rows.begin(), hp.rows.end(), [](const HierRow& r) { return r.serial_busbw > 0; });
    md += "### " + c.transport + ", " + std::to_string(c.nodes) + " nodes x " + std::to_string(c.per_node) +
          " ranks: hierarchical vs the flat " + std::to_string(n) + "-rank ring\n\n";
    md += "Fitted on the flat ring's sizes: alpha " + fixed(c.across.alpha_s * 1e6, 1) + " us, beta " +
          fixed(c.across.beta_s * 1e9, 3) + " ns/B (" + fixed(c.across.beta_s > 0 ? 1e-9 / c.across.beta_s : 0, 3) +
          " GB/s), r2 " + fixed(c.across.r2, 3) + ". Predicted: the flat ring " + std::to_string(2 * (n - 1)) +
          " alpha + " + std::to_string(2 * (n - 1)) + "/" + std::to_string(n) + " B beta; hierarchical, across the "
          "nodes only, " + std::to_string(2 * (c.nodes - 1)) + " alpha + " + std::to_string(2 * (c.nodes - 1)) +
          "/" + std::to_string(c.nodes) + " B beta (the predicted hier/flat column: an upper bound). " +
          pipeline_text(c) + within_text(c) + "\n\n";
    md += std::string("| size | flat busbw GB/s | hier busbw GB/s |") + (serial ? " levels one after the other hier/flat |" : "") +
          " measured hier/flat | predicted hier/flat | measured vs predicted |";
    md += c.within ? " both levels hier/flat | measured vs both levels |\n" : "\n";
    md += std::string("|---:|---:|---:|") + (serial ? "---:|" : "") + "---:|---:|---:|" + (c.within ? "---:|---:|\n" : "\n");
    for (const auto& r : hp.rows) {
      const bool measured = r.hier_busbw > 0;
      md += "| " + size_text(r.bytes) + " | " + fixed(r.flat_busbw, 3) + " | " +
            (measured ? fixed(r.hier_busbw, 3) : "not measured") + " | ";
      if (serial) md += ratio_or_dash(r.serial_busbw, r.flat_busbw) + " | ";
      md += ratio_or_dash(r.hier_busbw, r.flat_busbw) + " | " + fixed(r.predicted_ratio(), 3) + "x | " +
            (measured ? fixed((r.measured_ratio() / r.predicted_ratio() - 1) * 100, 1) + "%" : "-") + " |";
      if (c.within) {
        const double both = r.flat_predicted_s / *r.hier_model_s;
        md += " " + fixed(both, 3) + "x | " + (measured ? fixed((r.measured_ratio() / both - 1) * 100, 1) + "%" : "-") + " |";
      }
      md += "\n";
    }
    md += "\n";
  }
  return md;
}

namespace {

// The flat train point `hier` was measured beside: the same but for the hierarchical axes.
const CheckRow* flat_peer(const ModelCheck& mc, const CheckRow& hier) {
  const report::Point& h = *hier.point;
  for (const auto& r : mc.rows) {
    const report::Point& p = *r.point;
    if (r.hierarchical || p.nodes != h.nodes || p.transport != h.transport || p.model != h.model ||
        p.batch != h.batch || p.image_size != h.image_size || p.profile != h.profile)
      continue;
    auto axes = h.axes;
    for (const char* k : {"hierarchical", "hier_chunk"}) axes[axis_index(k)] = p.axes[axis_index(k)];
    if (axes == p.axes) return &r;
  }
  return nullptr;
}

// Each hierarchical train point against its flat peer: the measured gain beside the predicted one.
std::string md_measured_training(const ModelCheck& mc) {
  std::string md;
  for (const auto& r : mc.rows) {
    if (!r.hierarchical) continue;
    const CheckRow* flat = flat_peer(mc, r);
    const double images = double(r.ranks) * r.point->batch;
    md += "| " + report::label(*r.point, true) + " | " + fixed(images / r.measured_s, 1) + " | " +
          fixed(images / r.predicted_s, 1) + " (" + fixed((r.measured_s / r.predicted_s - 1) * 100, 1) + "%) | ";
    if (flat && flat->predicted_hier_s) {
      const double measured = flat->measured_s / r.measured_s, predicted = flat->predicted_s / *flat->predicted_hier_s;
      md += fixed(images / flat->measured_s, 1) + " | " + fixed(measured, 3) + "x | " + fixed(predicted, 3) + "x | " +
            fixed((measured / predicted - 1) * 100, 1) + "% |";
    } else {
      md += "no flat peer | - | - | - |";
    }
    md += " " + r.fit + " |\n";
  }
  if (md.empty()) return "";
  return "Each train point that ran the hierarchical allreduce, against the flat point measured beside it (the same "
         "but for hierarchical): its img/s, measured and predicted (the error: predicted over measured img/s), the "
         "flat point's measured img/s, and the gain, measured (flat step / hier step) and predicted (the flat "
         "point's predicted step over its predicted hierarchical step, the table above).\n\n| point | measured "
         "img/s | predicted img/s (error) | flat measured img/s | measured gain | predicted gain | measured vs "
         "predicted | hier cost |\n|---|---:|---:|---:|---:|---:|---:|---|\n" +
         md + "\n";
}

}  // namespace

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
  if (md.empty()) return md_measured_training(mc);
  return "Each train point of several ranks per node that ran the flat ring; its step replayed with the hierarchical "
         "allreduce's cost instead (both levels where the run fitted the one within the node, else across only: an "
         "upper bound). img/s = ranks x batch / step. The gain here is a prediction; a hierarchical point measured "
         "beside it checks it (the next table, where the run has one).\n\n| point | ranks | measured step ms | predicted flat step ms (error) | predicted hier step ms | "
         "measured img/s | predicted hier img/s | predicted gain | hier cost |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|---|\n" +
         md + "\n" + md_measured_training(mc);
}

}  // namespace ringbench::predict
