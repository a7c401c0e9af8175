#include "runner/predict/extrapolate.h"

#include "runner/predict/cost_fit.h"

namespace ringbench::predict {

std::vector<int> powers_of_two_nodes(int max_nodes) {
  std::vector<int> v;
  for (int n = 1; n <= max_nodes; n *= 2) v.push_back(n);
  return v;
}

namespace {

double step_with(const StepTimeline& t, const LinkCost& link, const std::string& algo, int nodes) {
  if (nodes == 1) return simulate_step({t.compute_s, t.optimizer_s, {}}, nullptr).step_s;
  const Terms terms_n = terms(algo, nodes);
  return simulate_step(t, [&](double bytes) {
           return terms_n.messages * link.alpha_s + terms_n.bytes * bytes * link.beta_s;
         }).step_s;
}

}  // namespace

std::vector<CurvePoint> scaling_curve(const StepTimeline& one_rank, const LinkCost& link,
                                      const std::vector<int>& nodes) {
  const double alone = step_with(one_rank, link, "ring", 1);
  std::vector<CurvePoint> curve;
  for (int n : nodes) {
    CurvePoint c{.nodes = n};
    c.ring_step_s = step_with(one_rank, link, "ring", n);
    c.hd_step_s = n > 1 ? step_with(one_rank, link, "hd", n) : c.ring_step_s;
    c.ring_efficiency = alone / c.ring_step_s;
    c.hd_efficiency = alone / c.hd_step_s;
    if (n > 1) {
      const Terms r = terms("ring", n);
      double lat = 0, bw = 0;
      for (const auto& b : one_rank.buckets) lat += r.messages * link.alpha_s, bw += r.bytes * b.bytes * link.beta_s;
      c.latency_share = lat + bw > 0 ? lat / (lat + bw) : 0;
    }
    curve.push_back(c);
  }
  return curve;
}

std::optional<double> latency_dominates_above(const StepTimeline& one_rank, const LinkCost& link) {
  if (link.alpha_s <= 0 || one_rank.buckets.empty()) return std::nullopt;
  double bytes = 0;
  for (const auto& b : one_rank.buckets) bytes += b.bytes;
  return bytes * link.beta_s / (double(one_rank.buckets.size()) * link.alpha_s);
}

std::optional<int> hd_wins_from(const std::vector<CurvePoint>& curve, double margin) {
  for (const auto& c : curve)
    if (c.nodes > 1 && c.hd_step_s <= (1 - margin) * c.ring_step_s) return c.nodes;
  return std::nullopt;
}

}  // namespace ringbench::predict
