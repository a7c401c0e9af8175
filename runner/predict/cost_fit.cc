#include "runner/predict/cost_fit.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "base/errors.h"

namespace ringbench::predict {

Terms terms(const std::string& algo, int nodes) {
  const double n = nodes;
  if (algo == "ring") return {2 * (n - 1), 2 * (n - 1) / n};
  if (algo == "direct") return {1, n - 1};
  if (algo == "rd") return {std::log2(n), std::log2(n)};
  if (algo == "hd") return {2 * std::log2(n), 2 * (n - 1) / n};
  throw Error("no cost model for the allreduce algorithm '" + algo + "' (ring, direct, rd, hd)");
}

bool has_cost_model(const std::string& algo) { return algo == "ring" || algo == "direct" || algo == "rd" || algo == "hd"; }

double CostFit::seconds(int nodes, double bytes) const {
  const Terms t = terms(algo, nodes);
  return t.messages * alpha_s + t.bytes * bytes * beta_s;
}

namespace {

std::vector<double> abs_errors(const std::vector<Residual>& rs) {
  std::vector<double> e;
  for (const auto& r : rs) e.push_back(std::fabs(r.error()));
  std::sort(e.begin(), e.end());
  return e;
}

// Minimizes sum w·(t - a·x - b·y)^2 over a, b >= 0.
struct Design {
  double x, y, t, w;
};
std::pair<double, double> solve(const std::vector<Design>& d) {
  double sxx = 0, sxy = 0, syy = 0, sxt = 0, syt = 0;
  for (const auto& p : d) {
    sxx += p.w * p.x * p.x, sxy += p.w * p.x * p.y, syy += p.w * p.y * p.y;
    sxt += p.w * p.x * p.t, syt += p.w * p.y * p.t;
  }
  const double det = sxx * syy - sxy * sxy;
  double a = det > 0 ? (sxt * syy - syt * sxy) / det : -1, b = det > 0 ? (syt * sxx - sxt * sxy) / det : -1;
  if (det > 1e-12 * sxx * syy && a >= 0 && b >= 0) return {a, b};
  // On the boundary: the better of latency alone and bandwidth alone.
  const double a_only = sxx > 0 ? std::max(0.0, sxt / sxx) : 0, b_only = syy > 0 ? std::max(0.0, syt / syy) : 0;
  double sa = 0, sb = 0;
  for (const auto& p : d) {
    sa += p.w * std::pow(p.t - a_only * p.x, 2);
    sb += p.w * std::pow(p.t - b_only * p.y, 2);
  }
  return sa < sb ? std::pair{a_only, 0.0} : std::pair{0.0, b_only};
}

}  // namespace

double CostFit::median_abs_error() const {
  const auto e = abs_errors(residuals);
  if (e.empty()) return 0;
  return e.size() % 2 ? e[e.size() / 2] : (e[e.size() / 2 - 1] + e[e.size() / 2]) / 2;
}

double CostFit::max_abs_error() const {
  const auto e = abs_errors(residuals);
  return e.empty() ? 0 : e.back();
}

CostFit fit_cost(const std::string& algo, const std::vector<CostSample>& samples) {
  std::vector<Design> d;
  for (const auto& s : samples) {
    if (!(s.seconds > 0) || !std::isfinite(s.seconds) || s.bytes <= 0 || s.nodes < 2)
      throw Error("cost sample (N=" + std::to_string(s.nodes) + ", " + std::to_string(s.bytes) + " B, " +
                  std::to_string(s.seconds) + " s) is not a measured allreduce");
    const Terms t = terms(algo, s.nodes);
    d.push_back({t.messages, t.bytes * s.bytes, s.seconds, 1 / (s.seconds * s.seconds)});
  }
  const bool distinct = std::any_of(d.begin(), d.end(), [&](const Design& p) {
    return std::fabs(p.x * d[0].y - p.y * d[0].x) > 1e-9 * (p.x * d[0].y + p.y * d[0].x);
  });
  if (d.size() < 2 || !distinct)
    throw Error("an α-β fit of '" + algo + "' needs at least two different sizes (got " +
                std::to_string(d.size()) + " sample(s))");
  CostFit f;
  f.algo = algo;
  std::tie(f.alpha_s, f.beta_s) = solve(d);
  double mean = 0, ss_tot = 0, ss_res = 0;
  for (const auto& s : samples) mean += s.seconds / double(samples.size());
  f.min_bytes = samples[0].bytes, f.max_bytes = samples[0].bytes;
  for (const auto& s : samples) {
    const double fit = f.seconds(s.nodes, s.bytes);
    f.residuals.push_back({s.nodes, s.bytes, s.seconds, fit});
    ss_tot += (s.seconds - mean) * (s.seconds - mean);
    ss_res += (s.seconds - fit) * (s.seconds - fit);
    f.min_bytes = std::min(f.min_bytes, s.bytes), f.max_bytes = std::max(f.max_bytes, s.bytes);
  }
  f.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1;
  return f;
}

}  // namespace ringbench::predict
