// The mean of a sample and its 95% Student-t confidence interval, as training runs and sweep
// reports give them; the least-squares line through (x, y) points.
#pragma once

#include <cmath>
#include <cstddef>
#include <iterator>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace ringbench {

// Two-sided 95% Student t quantile, for the confidence interval of a mean of n samples.
inline double t95(size_t n) {
  static const double t[] = {0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262,
                             2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101,
                             2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052,
                             2.048, 2.045, 2.042};
  const size_t df = n - 1;
  return df < std::size(t) ? t[df] : 1.96;
}

struct MeanCi {
  double mean = 0, ci95 = 0;  // ci95 is 0 below two samples
  size_t n = 0;
};

inline MeanCi mean_ci(const std::vector<double>& v) {
  MeanCi r;
  r.n = v.size();
  if (v.empty()) return r;
  for (double x : v) r.mean += x;
  r.mean /= double(v.size());
  if (v.size() < 2) return r;
  double ss = 0;
  for (double x : v) ss += (x - r.mean) * (x - r.mean);
  r.ci95 = t95(v.size()) * std::sqrt(ss / double(v.size() - 1)) / std::sqrt(double(v.size()));
  return r;
}

// The least-squares line y = intercept + slope * x, and its r²: nullopt below two distinct x,
// where there is no slope to fit.
struct LineFit {
  double intercept = 0, slope = 0, r2 = 0;
  size_t points = 0, distinct_x = 0;
  double at(double x) const { return intercept + slope * x; }
};

inline std::optional<LineFit> fit_line(const std::vector<std::pair<double, double>>& xy) {
  std::set<double> xs;
  for (const auto& p : xy) xs.insert(p.first);
  if (xs.size() < 2) return std::nullopt;
  const double n = double(xy.size());
  double mx = 0, my = 0;
  for (const auto& [x, y] : xy) mx += x / n, my += y / n;
  double sxx = 0, sxy = 0, syy = 0;
  for (const auto& [x, y] : xy) sxx += (x - mx) * (x - mx), sxy += (x - mx) * (y - my), syy += (y - my) * (y - my);
  LineFit f;
  f.slope = sxy / sxx;
  f.intercept = my - f.slope * mx;
  double ss_res = 0;
  for (const auto& [x, y] : xy) ss_res += (y - f.at(x)) * (y - f.at(x));
  f.r2 = syy > 0 ? 1 - ss_res / syy : 1;
  f.points = xy.size();
  f.distinct_x = xs.size();
  return f;
}

}  // namespace ringbench
