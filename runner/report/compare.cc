// `ringbench compare RUN_A RUN_B`: per-point deltas between two runs, judged against the noise.
#include "runner/report/report.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "runner/analysis/format.h"
#include "runner/analysis/run.h"

namespace ringbench::report {
namespace {

struct Measure {
  std::string metric;
  std::optional<double> value;  // none: the point has no result
  double noise = 0;             // CI95 / median
};

Measure relative(const std::string& metric, const std::vector<double>& v) {
  if (v.empty()) return {metric, std::nullopt, 0};
  const double m = median(v);
  return {metric, m, v.size() >= 2 && m > 0 ? mean_ci(v).ci95 / m : 0};
}

// Train, share, migrate and remote: median total img/s (share: summed over the VMs; migrate: the
// job's, its migration included; remote: summed over the clients). Collectives: median busbw at `bytes`.
Measure measure(const Point& p, std::optional<uint64_t> bytes) {
  if (p.kind == PointKind::train || p.kind == PointKind::share || p.kind == PointKind::infer ||
      p.kind == PointKind::migrate || p.kind == PointKind::remote) {
    std::vector<double> v;
    for (const auto& t : p.total) v.push_back(t.second);
    return relative(p.kind == PointKind::infer ? "Offline samples/s" : "total img/s", v);
  }
  if (!bytes) return {"busbw GB/s", std::nullopt, 0};
  return relative("busbw GB/s @" + fmt_bytes(*bytes), p.sizes.at(*bytes).busbw);
}

// The largest size with busbw in both runs.
std::optional<uint64_t> common_size(const Point& a, const Point& b) {
  for (auto it = a.sizes.rbegin(); it != a.sizes.rend(); ++it) {
    const auto other = b.sizes.find(it->first);
    if (!it->second.busbw.empty() && other != b.sizes.end() && !other->second.busbw.empty())
      return it->first;
  }
  return std::nullopt;
}

struct Verdict {
  std::string point, metric, a, b, delta, noise, verdict;
  bool broke = false;  // a result in A, none in B
};

Verdict judge(const Point* a, const Point* b, const CompareOptions& opts) {
  if (!b) return {a->id, "", "", "", "", "", "only in A"};
  if (!a) return {b->id, "", "", "", "", "", "only in B"};
  const auto bytes = a->kind == PointKind::collectives ? common_size(*a, *b) : std::nullopt;
  if (a->kind == PointKind::collectives && !bytes && !a->sizes.empty() && !b->sizes.empty())
    return {a->id, "busbw GB/s", "", "", "", "", "no common size"};
  const Measure ma = measure(*a, bytes), mb = measure(*b, bytes);
  const int decimals = a->kind == PointKind::collectives ? 3 : 1;
  const bool skipped = a->status() == "skipped" && b->status() == "skipped";
  // Not fitting the profile's framebuffer is a result of B, not a regression.
  const bool misfit = !mb.value && b->status() == "does_not_fit";
  const auto shown = [](const Point& p) {
    return p.status() == "does_not_fit" ? std::string("does not fit") : p.status();
  };
  Verdict v{a->id, ma.metric, ma.value ? fixed(*ma.value, decimals) : shown(*a),
            mb.value ? fixed(*mb.value, decimals) : shown(*b), "", "",
            skipped ? "skipped" : misfit || (!ma.value && a->status() == "does_not_fit")
                                      ? "does not fit"
                                      : "failed",
            ma.value && !mb.value && !misfit};
  if (!ma.value || !mb.value || *ma.value <= 0) return v;
  const double delta = *mb.value / *ma.value - 1, noise = std::max(ma.noise, mb.noise);
  const double bar = std::max(opts.threshold, noise);
  if (delta >= 0) v.delta += '+';  // appended: GCC 12's -Wrestrict misfires on "+" + std::string
  v.delta += fixed(100 * delta, 1);
  v.noise = fixed(100 * noise, 1);
  v.verdict = delta < -bar ? "REGRESSION" : delta > bar ? "faster" : "ok";
  return v;
}

void print_verdicts(const std::vector<Verdict>& rows) {
  size_t wp = 5, wm = 6, wv = 10;
  for (const auto& r : rows) {
    wp = std::max(wp, r.point.size());
    wm = std::max(wm, r.metric.size());
    wv = std::max({wv, r.a.size(), r.b.size()});
  }
  const auto line = [&](const Verdict& r) {
    std::printf("%-*s  %-*s  %*s  %*s  %8s  %8s  %s\n", int(wp), r.point.c_str(), int(wm),
                r.metric.c_str(), int(wv), r.a.c_str(), int(wv), r.b.c_str(), r.delta.c_str(),
                r.noise.c_str(), r.verdict.c_str());
  };
  line({"point", "metric", "A", "B", "delta %", "noise %", "verdict"});
  for (const auto& r : rows) line(r);
}

}  // namespace

}  // namespace ringbench::report

// compare_runs is ringbench's (report.h); what it uses is the report's.
namespace ringbench {

using namespace report;

int compare_runs(const std::string& run_a, const std::string& run_b, const CompareOptions& opts) {
  const Run a = load_run(run_a, ReportOptions{}.straggler_margin);
  const Run b = load_run(run_b, ReportOptions{}.straggler_margin);
  std::map<std::string, std::pair<const Point*, const Point*>> matched;
  for (const auto& p : a.points) matched[p.id].first = &p;
  for (const auto& p : b.points) matched[p.id].second = &p;
  std::vector<std::pair<const Point*, const Point*>> pairs;
  for (const auto& m : matched) pairs.push_back(m.second);
  const auto key = [](const std::pair<const Point*, const Point*>& m) {
    return order_key(m.first ? *m.first : *m.second);
  };
  std::sort(pairs.begin(), pairs.end(),
            [&](const auto& x, const auto& y) { return key(x) < key(y); });

  std::printf("A: %s (sweep %s, run %s)\nB: %s (sweep %s, run %s)\n", run_a.c_str(),
              a.sweep.c_str(), a.run_id.c_str(), run_b.c_str(), b.sweep.c_str(), b.run_id.c_str());
  std::printf("A regression: B worse than A by more than the threshold (%s%%) and the noise "
              "(the larger relative 95%% CI of the two runs).\n\n",
              fixed(100 * opts.threshold, 1).c_str());
  std::vector<Verdict> rows;
  std::map<std::string, int> counts;
  int broke = 0;
  for (const auto& [pa, pb] : pairs) {
    rows.push_back(judge(pa, pb, opts));
    ++counts[rows.back().verdict];
    broke += rows.back().broke;
  }
  print_verdicts(rows);
  const int regressions = counts["REGRESSION"];
  const std::string misfits =  // only where a point did not fit: other runs read as before
      counts["does not fit"] ? ", " + std::to_string(counts["does not fit"]) + " does not fit" : "";
  std::printf("\n%d regression%s beyond noise, %d faster, %d ok, %d failed%s, %d skipped, "
              "%d only in A, %d only in B\n",
              regressions, regressions == 1 ? "" : "s", counts["faster"], counts["ok"],
              counts["failed"], misfits.c_str(), counts["skipped"], counts["only in A"],
              counts["only in B"]);
  if (broke)
    std::printf("%d point%s with a result in A failed in B: --fail-on-regression counts %s as "
                "regressions\n",
                broke, broke == 1 ? "" : "s", broke == 1 ? "it" : "them");
  std::fflush(stdout);
  return opts.fail_on_regression && regressions + broke > 0 ? 1 : 0;
}

}  // namespace ringbench
