// The Server scenario's peak QPS: exponential bracketing, then bisection.
#include <algorithm>
#include <cmath>
#include <string>

#include "base/errors.h"
#include "runner/infer/loadgen.h"

namespace ringbench::infer {

namespace {

// Runs one rate, records it, and says whether it met the bound.
struct Searcher {
  const std::function<ServerResult(double)>& run_at;
  const QpsSearchSettings& settings;
  QpsSearch out;

  bool can_run() const { return static_cast<int>(out.tries.size()) < settings.max_runs; }
  bool met(double qps) {
    out.tries.push_back({qps, run_at(qps)});
    return out.tries.back().result.bound_met;
  }
  // [lower met, upper missed]: doubling up from a rate that met it, or halving down from one
  // that missed it (down to 2^-30 of the start, and not below min_qps: then nothing meets it).
  void bracket(double start) {
    double lower = 0, upper = 0;
    if (met(start)) {
      for (lower = start; can_run() && met(2 * lower);) lower *= 2;
      upper = out.tries.back().result.bound_met ? 0 : 2 * lower;  // 0: it never missed
    } else {
      const double lowest = std::max(start * 0x1p-30, settings.min_qps);
      for (upper = start; can_run() && upper / 2 >= lowest && !met(upper / 2);) upper /= 2;
      lower = out.tries.back().result.bound_met ? upper / 2 : 0;
    }
    out.peak_qps = lower;
    out.upper_qps = upper;
  }
  void bisect() {
    while (out.peak_qps > 0 && out.upper_qps > 0 && can_run() &&
           out.upper_qps - out.peak_qps > settings.precision * out.peak_qps) {
      const double mid = (out.peak_qps + out.upper_qps) / 2;
      (met(mid) ? out.peak_qps : out.upper_qps) = mid;
    }
  }
};

}  // namespace

QpsSearch find_peak_qps(const std::function<ServerResult(double qps)>& run_at, const QpsSearchSettings& search) {
  if (!(search.start_qps > 0 && std::isfinite(search.start_qps)) || !(search.precision > 0) || search.max_runs < 1)
    throw Error("QPS search: needs a start rate > 0 (" + std::to_string(search.start_qps) + "), a precision > 0 (" +
                std::to_string(search.precision) + ") and at least one run");
  Searcher s{run_at, search, {}};
  s.bracket(search.start_qps);
  s.bisect();
  s.out.found = s.out.peak_qps > 0;
  return s.out;
}

QpsSearch find_peak_qps(InferTarget& target, Clock& clock, const ServerSettings& settings,
                        const QpsSearchSettings& search) {
  return find_peak_qps(
      [&](double qps) {
        ServerSettings at = settings;
        at.target_qps = qps;
        return run_server(target, clock, at);
      },
      search);
}

const ServerResult* QpsSearch::peak() const {
  for (const QpsTry& t : tries)
    if (found && t.qps == peak_qps) return &t.result;
  return nullptr;
}

}  // namespace ringbench::infer
