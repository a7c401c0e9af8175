// Server: Poisson arrivals, dynamic batching, one batch at a time.
#include <algorithm>
#include <deque>
#include <string>

#include "base/errors.h"
#include "runner/infer/loadgen.h"
#include "runner/infer/text_format.h"

namespace ringbench::infer {

namespace {

// serve()'s state. Times are kept absolute (the clock's), so that a virtual clock that jumped to
// a deadline compares equal to it: relative times would round differently.
struct Engine {
  Engine(InferTarget& t, Clock& c, Arrivals& a, const BatchPolicy& p, const std::function<void(const QueryTiming&)>& d)
      : target(t), clock(c), arrivals(a), policy(p), done(d) {
    if (has_next) counts.last_arrival_s = next;
  }
  InferTarget& target;
  Clock& clock;
  Arrivals& arrivals;
  const BatchPolicy& policy;
  const std::function<void(const QueryTiming&)>& done;
  double t0 = clock.now_s();
  std::deque<double> waiting;  // arrival times, oldest first
  double next = 0;             // the next arrival, relative, when has_next
  bool has_next = arrivals.next(&next);
  ServeCounts counts;

  void pull() {
    has_next = arrivals.next(&next);
    if (has_next) counts.last_arrival_s = next;
  }
  void admit(double now) {
    for (; has_next && t0 + next <= now; pull()) {
      waiting.push_back(t0 + next);
      ++counts.arrived;
    }
  }
  void launch(int n) {
    const double start = clock.now_s();
    target.run(n);
    const double end = clock.now_s();
    for (int i = 0; i < n; ++i, waiting.pop_front())
      done({waiting.front() - t0, start - t0, end - t0, end - waiting.front(), n});
    counts.served += n;
    ++counts.batches;
    counts.last_done_s = end - t0;
  }
  // What is left when the cap passes: the waiting queries and the arrivals not yet given.
  void give_up() {
    counts.capped = true;
    counts.unserved = static_cast<int64_t>(waiting.size());
    for (; has_next; pull()) ++counts.unserved, ++counts.arrived;
  }
  // One step: admit, then launch a batch or sleep until the next thing that could launch one.
  // False when every query is done or the cap has passed.
  bool step(double cap) {
    const double now = clock.now_s();
    admit(now);
    if (waiting.empty() && !has_next) return false;
    if (now >= cap) return give_up(), false;
    if (waiting.empty()) return clock.sleep_until_s(t0 + next), true;
    const int size = static_cast<int>(std::min<size_t>(waiting.size(), static_cast<size_t>(policy.max_batch)));
    const double deadline = waiting.front() + policy.timeout_s;
    if (size == policy.max_batch || now >= deadline) return launch(size), true;
    clock.sleep_until_s(has_next ? std::min(deadline, t0 + next) : deadline);
    return true;
  }
};

}  // namespace

ServeCounts serve(InferTarget& target, Clock& clock, Arrivals& arrivals, const BatchPolicy& policy,
                  double max_duration_s, const std::function<void(const QueryTiming&)>& done) {
  if (policy.max_batch < 1 || policy.max_batch > target.max_batch() || !(policy.timeout_s >= 0))
    throw Error("Server: max batch " + std::to_string(policy.max_batch) + " must be in [1, " +
                std::to_string(target.max_batch()) + "] and the batch timeout >= 0 (" +
                std::to_string(policy.timeout_s) + " s)");
  Engine e(target, clock, arrivals, policy, done);
  const double cap = e.t0 + max_duration_s;
  while (e.step(cap)) {
  }
  return e.counts;
}

namespace {

// The tail estimate on the side of the bound that the exact count says it is on (both the
// estimate and the bound are then within the histogram's error of the true value).
double tail_estimate(const LatencyHistogram& h, const ServerSettings& s, bool within) {
  if (h.count() == 0) return 0;
  const double est = h.percentile(s.latency_percentile);
  return within ? std::min(est, s.latency_bound_s) : std::max(est, s.latency_bound_s);
}

void judge(ServerResult& r, const ServerSettings& s, const LatencyHistogram& h, bool capped) {
  const int64_t within = r.served - r.over_bound;
  const bool tail_within = r.served > 0 && within >= quantile_rank(s.latency_percentile, r.served);
  r.bound_met = tail_within && r.unserved == 0;
  r.tail_latency_s = tail_estimate(h, s, tail_within);
  r.validity = check_loadgen_rules(Scenario::Server, s.rules, {r.duration_s, r.queries, capped});
  const std::string label = percentile_label(s.latency_percentile);
  if (r.served == 0 && r.unserved == 0) r.validity.reasons.push_back("no queries");
  if (!tail_within && r.served > 0)
    r.validity.reasons.push_back(label + " " + ms(r.tail_latency_s) + " > " + shortest(s.latency_bound_s * 1e3) +
                                 " ms bound");
  if (r.unserved > 0) r.validity.reasons.push_back(std::to_string(r.unserved) + " queries unserved");
}

void fill_counts(ServerResult& r, const ServeCounts& c) {
  r.queries = c.arrived;
  r.served = c.served;
  r.unserved = c.unserved;
  r.batches = c.batches;
  r.duration_s = c.last_arrival_s;
  r.scheduled_qps = r.duration_s > 0 ? static_cast<double>(r.queries) / r.duration_s : 0;
  r.completed_qps = c.last_done_s > 0 ? static_cast<double>(r.served) / c.last_done_s : 0;
  r.mean_batch = r.batches ? static_cast<double>(r.served) / static_cast<double>(r.batches) : 0;
}

}  // namespace

ServerResult run_server(InferTarget& target, Clock& clock, const ServerSettings& s, Arrivals& arrivals) {
  s.rules.check();
  if (!(s.latency_percentile > 0 && s.latency_percentile <= 1) || !(s.latency_bound_s > 0))
    throw Error("Server: the latency percentile must be in (0, 1] and the bound > 0");
  const BatchPolicy policy{s.max_batch ? s.max_batch : target.max_batch(), s.batch_timeout_s};
  ServerResult r;
  r.target_qps = s.target_qps;
  r.latency_bound_s = s.latency_bound_s;
  r.latency_percentile = s.latency_percentile;
  r.max_batch = policy.max_batch;
  r.batch_timeout_s = policy.timeout_s;
  LatencyHistogram h;
  const ServeCounts c = serve(target, clock, arrivals, policy, s.rules.max_duration_s, [&](const QueryTiming& q) {
    h.record(q.latency_s);
    if (q.latency_s > s.latency_bound_s) ++r.over_bound;
  });
  fill_counts(r, c);
  r.latency = h.summary();
  judge(r, s, h, c.capped || arrivals.capped());
  return r;
}

ServerResult run_server(InferTarget& target, Clock& clock, const ServerSettings& settings) {
  PoissonArrivals arrivals(settings.target_qps, settings.seed, settings.rules);
  return run_server(target, clock, settings, arrivals);
}

}  // namespace ringbench::infer
