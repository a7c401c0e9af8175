#include "runner/predict/md_model_check.h"

#include <cmath>

#include "runner/analysis/format.h"

namespace ringbench::predict {

using report::fixed;
using report::md_table;

namespace {

std::string signed_percent(double fraction) {
  return (fraction >= 0 ? "+" : "") + fixed(100 * fraction, 1) + "%";
}

std::string fit_nodes(const TransportFit& f) { return f.nodes ? std::to_string(f.nodes) : "all"; }

// Every size's residual, by N and size: "N=2: 64K -47.2%, 256K +40.2%".
std::string residuals_text(const CostFit& f) {
  auto rs = f.residuals;
  std::stable_sort(rs.begin(), rs.end(), [](const Residual& a, const Residual& b) {
    return std::pair(a.nodes, a.bytes) < std::pair(b.nodes, b.bytes);
  });
  std::string s;
  for (size_t i = 0; i < rs.size(); ++i) {
    const bool new_n = i == 0 || rs[i].nodes != rs[i - 1].nodes;
    s += std::string(i ? (new_n ? "; " : ", ") : "") + (new_n ? "N=" + std::to_string(rs[i].nodes) + ": " : "") +
         report::fmt_bytes(uint64_t(rs[i].bytes)) + " " + signed_percent(rs[i].error());
  }
  return s;
}

}  // namespace

std::string md_fits(const ModelCheck& mc) {
  if (mc.fits.empty()) return "No allreduce cost fit: the run has no collectives points with two or more sizes.\n\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& f : mc.fits) {
    const bool exact = f.fit.residuals.size() <= 2;  // two parameters through two points: no test of the model
    rows.push_back({f.transport, fit_nodes(f), f.fit.algo, fixed(f.fit.alpha_s * 1e6, 2), fixed(f.fit.beta_s * 1e9, 4),
                    f.fit.beta_s > 0 ? fixed(1e-9 / f.fit.beta_s, 3) : "inf",
                    report::fmt_bytes(uint64_t(f.fit.min_bytes)) + "-" + report::fmt_bytes(uint64_t(f.fit.max_bytes)),
                    exact ? "- (2 sizes)" : fixed(f.fit.r2, 4),
                    exact ? "-" : fixed(100 * f.fit.median_abs_error(), 1) + "%", exact ? "-" : residuals_text(f.fit)});
  }
  return md_table({"transport", "N", "algo", "α us", "β ns/B", "1/β GB/s", "sizes", "R²", "median |resid|",
                   "residual per size (fit / measured - 1)"},
                  "lrlrrrrrrl", rows);
}

std::string md_check_rows(const ModelCheck& mc) {
  if (mc.rows.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : mc.rows)
    rows.push_back({report::label(*r.point, true), r.fit.empty() ? "-" : r.fit, std::to_string(r.repeats),
                    fixed(r.measured_s * 1e3, 2), fixed(r.predicted_s * 1e3, 2), signed_percent(r.error()),
                    fixed(r.measured_exposed_s * 1e3, 2), fixed(r.predicted_exposed_s * 1e3, 2),
                    r.in_situ_ratio ? fixed(*r.in_situ_ratio, 2) : "-",
                    r.predicted_from_one_node_s ? fixed(*r.predicted_from_one_node_s * 1e3, 2) + " (" +
                                                      signed_percent(*r.predicted_from_one_node_s / r.measured_s - 1) + ")"
                                                : "-"});
  std::string md = md_table({"point", "fit", "repeats", "measured ms", "predicted ms", "error", "exposed ms",
                             "predicted exposed ms", "in-situ allreduce / fit", "from N=1 compute ms (error)"},
                            "lllrrrrrrr", rows);
  md += "median |error| " + fixed(100 * mc.median_abs_error(), 1) + "%, max |error| " +
        fixed(100 * mc.max_abs_error(), 1) + "% over " + std::to_string(mc.rows.size()) + " points.\n\n";
  return md;
}

std::string md_model_check(const ModelCheck& mc) {
  if (mc.rows.empty()) return "";
  std::string md =
      "## Model check\n\n"
      "Each train point's step time as `ringbench predict` models it: the point's own measured forward, "
      "backward, bucket release times and optimizer, with every gradient bucket allreduced in order at the "
      "cost fitted from this run's collectives points (time = 2(N-1)·α + 2(N-1)/N·bytes·β for the ring). "
      "Means over the ok repeats. *in-situ allreduce / fit*: the buckets' allreduce time measured inside "
      "training over the fit's; above 1, training slowed its own allreduce (CPU shared with compute). *from N=1 compute*: the same "
      "prediction from the one-node point's timeline, as an extrapolation to an unmeasured N would make it; "
      "its gap to *predicted* is what running N ranks did to compute (here: nodes sharing cores). "
      "One-rank points are not listed: they have nothing to predict.\n\n";
  md += md_fits(mc) + md_check_rows(mc);
  for (const auto& u : mc.unchecked) md += "- not checked: " + u + "\n";
  return md + (mc.unchecked.empty() ? "" : "\n");
}

}  // namespace ringbench::predict
