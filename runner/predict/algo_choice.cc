#include "runner/predict/algo_choice.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace ringbench::predict {
namespace {

struct Choice {
  std::string algo, basis;
  bool operator!=(const Choice& o) const { return algo != o.algo || basis != o.basis; }
};

// How far (in log2 size) `bytes` lies outside the sizes `f` was fitted on: 0 within.
double distance(const CostFit& f, double bytes) {
  const double b = std::max(bytes, 1.0);
  if (b < f.min_bytes) return std::log2(f.min_bytes / b);
  if (b > f.max_bytes) return std::log2(b / f.max_bytes);
  return 0;
}

// The fastest of the fits measured at `bytes`; where none was, of the nearest measured ones.
Choice choose(const std::vector<const CostFit*>& fits, int nodes, size_t bytes) {
  double nearest = INFINITY;
  for (const CostFit* f : fits) nearest = std::min(nearest, distance(*f, double(bytes)));
  const CostFit* best = nullptr;
  for (const CostFit* f : fits)
    if (distance(*f, double(bytes)) <= nearest * (1 + 1e-12) &&
        (!best || f->seconds(nodes, double(bytes)) < best->seconds(nodes, double(bytes))))
      best = f;
  return {best->algo, nearest == 0 ? "measured" : "nearest measured"};
}

// The sizes where the choice changes: a log grid (8 points per doubling up to 2^50 bytes), each
// change bisected to the byte.
std::vector<size_t> changes(const std::vector<const CostFit*>& fits, int nodes) {
  std::vector<size_t> grid{0};
  for (int k = 0; k <= 8 * 50; ++k) grid.push_back(std::max(grid.back() + 1, size_t(std::llround(std::exp2(k / 8.0)))));
  std::vector<size_t> out;
  for (size_t i = 1; i < grid.size(); ++i) {
    const Choice before = choose(fits, nodes, grid[i - 1]);
    if (!(choose(fits, nodes, grid[i]) != before)) continue;
    size_t lo = grid[i - 1], hi = grid[i];  // choice(lo) == before, choice(hi) differs
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      (choose(fits, nodes, mid) != before ? hi : lo) = mid;
    }
    out.push_back(hi);
  }
  return out;
}

AlgoTableEntry entry(const std::string& transport, int nodes, const std::vector<const CostFit*>& fits) {
  AlgoTableEntry e{transport, nodes, {}, {}};
  for (const CostFit* f : fits) e.fits.push_back({f->algo, f->alpha_s, f->beta_s, f->min_bytes, f->max_bytes, f->r2});
  const auto starts = changes(fits, nodes);
  for (size_t i = 0; i <= starts.size(); ++i) {
    AlgoTableRange r;
    r.from_bytes = i ? starts[i - 1] : 0;
    if (i < starts.size()) r.to_bytes = starts[i] - 1;
    const Choice c = choose(fits, nodes, r.from_bytes);
    r.algo = c.algo, r.basis = c.basis;
    for (const CostFit* f : fits)
      r.predicted_s[f->algo] = {f->seconds(nodes, double(r.from_bytes)),
                                r.to_bytes ? std::optional(f->seconds(nodes, double(*r.to_bytes))) : std::nullopt};
    e.ranges.push_back(r);
  }
  return e;
}

}  // namespace

AlgoTable choose_algorithms(const std::vector<TransportFit>& fits, const std::string& source) {
  std::map<std::pair<std::string, int>, std::vector<const CostFit*>> groups;
  for (const auto& f : fits)
    if (f.nodes > 1 && has_cost_model(f.fit.algo)) groups[{f.transport, f.nodes}].push_back(&f.fit);
  AlgoTable t{source, {}};
  for (const auto& [key, group] : groups) t.entries.push_back(entry(key.first, key.second, group));
  return t;
}

std::string md_algo_table(const AlgoTable& t) {
  if (t.entries.empty()) return "No entry: the run has no allreduce fit of ours at any N (mpi and nccl choose their own).\n";
  std::string s;
  for (const auto& e : t.entries) {
    std::string missing;
    for (const char* a : {"ring", "hd", "direct", "rd"})
      if (std::none_of(e.fits.begin(), e.fits.end(), [&](const AlgoTableFit& f) { return f.algo == a; }))
        missing += std::string(missing.empty() ? "" : ", ") + a;
    s += "- " + e.transport + " N=" + std::to_string(e.nodes) + ": " + ranges_text(e) +
         (missing.empty() ? "" : "; not measured at this N, never chosen: " + missing) + "\n";
  }
  return s;
}

}  // namespace ringbench::predict
