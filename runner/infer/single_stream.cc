// SingleStream: one single-sample query at a time, the next issued as the last completes.
#include <limits>

#include "runner/infer/loadgen.h"

namespace ringbench::infer {

SingleStreamResult run_single_stream(InferTarget& target, Clock& clock, const RunRules& rules) {
  rules.check();
  LatencyHistogram latencies;
  const double t0 = clock.now_s();
  double last_issue = -std::numeric_limits<double>::infinity();
  bool capped = false;
  SingleStreamResult r;
  while (!(r.queries > 0 && r.queries >= rules.min_count && last_issue >= rules.min_duration_s)) {
    const double issue = clock.now_s();
    if (issue - t0 >= rules.max_duration_s) {
      capped = true;
      break;
    }
    target.run(1);
    latencies.record(clock.now_s() - issue);
    last_issue = issue - t0;
    ++r.queries;
  }
  r.duration_s = r.queries ? last_issue : 0;
  r.elapsed_s = clock.now_s() - t0;
  r.qps = r.elapsed_s > 0 ? static_cast<double>(r.queries) / r.elapsed_s : 0;
  r.latency = latencies.summary();
  r.validity = check_loadgen_rules(Scenario::SingleStream, rules, {r.duration_s, r.queries, capped});
  return r;
}

}  // namespace ringbench::infer
