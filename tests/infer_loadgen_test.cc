// The inference scenarios (runner/infer/) on a virtual clock with fake targets of known service
// time a + b * batch: every latency, count and rate is checked exactly, or within a stated bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "base/errors.h"
#include "runner/infer/arrivals.h"
#include "runner/infer/clock.h"
#include "runner/infer/latency_histogram.h"
#include "runner/infer/loadgen.h"
#include "runner/infer/run_rules.h"

namespace ringbench::infer {
namespace {

// Serves a batch of n in a + b * n seconds of virtual time, and remembers the batch sizes.
struct FakeTarget : InferTarget {
  VirtualClock& clock;
  double a, b;
  int max;
  std::vector<int> batches;
  FakeTarget(VirtualClock& c, double a_s, double b_s, int max_batch) : clock(c), a(a_s), b(b_s), max(max_batch) {}
  void run(int n) override {
    batches.push_back(n);
    clock.advance_s(a + b * n);
  }
  int max_batch() const override { return max; }
};

RunRules rules(double min_duration_s, int64_t min_count, double max_duration_s = 1e6) {
  return {.min_duration_s = min_duration_s, .min_count = min_count, .max_duration_s = max_duration_s};
}

// ---- The histogram

TEST(LatencyHistogram, BucketErrorIsTwoPointTwoPercent) {
  EXPECT_NEAR(LatencyHistogram::relative_error(), 0.02190, 1e-5);
}

TEST(LatencyHistogram, QuantileRankIsNearestRank) {
  EXPECT_EQ(quantile_rank(0.99, 100), 99);
  EXPECT_EQ(quantile_rank(0.99, 101), 100);
  EXPECT_EQ(quantile_rank(0.5, 3), 2);
  EXPECT_EQ(quantile_rank(0.999, 10), 10);
  EXPECT_EQ(quantile_rank(1.0, 7), 7);
  EXPECT_EQ(quantile_rank(0.01, 10), 1);
}

TEST(LatencyHistogram, PercentilesWithinTheBucketError) {
  // 20001 latencies spread over 5 decades (10 us .. 1 s), from a fixed LCG.
  std::vector<double> v;
  uint64_t s = 12345;
  LatencyHistogram h;
  double sum = 0;
  for (int i = 0; i < 20001; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(s >> 11) * 0x1p-53;
    v.push_back(1e-5 * std::pow(10.0, 5 * u));
    h.record(v.back());
    sum += v.back();
  }
  std::sort(v.begin(), v.end());
  for (double p : {0.5, 0.9, 0.95, 0.99, 0.999, 0.123, 1.0}) {
    const double exact = v[static_cast<size_t>(quantile_rank(p, static_cast<int64_t>(v.size())) - 1)];
    EXPECT_LE(std::abs(h.percentile(p) / exact - 1), LatencyHistogram::relative_error() + 1e-12) << "p = " << p;
  }
  const LatencySummary sum_up = h.summary();
  EXPECT_EQ(sum_up.count, 20001);
  EXPECT_EQ(sum_up.min_s, v.front());
  EXPECT_EQ(sum_up.max_s, v.back());
  EXPECT_NEAR(sum_up.mean_s, sum / 20001, 1e-15);
  EXPECT_EQ(sum_up.p99_s, h.percentile(0.99));
  EXPECT_EQ(sum_up.p999_s, h.percentile(0.999));
}

TEST(LatencyHistogram, EqualLatenciesAreExact) {
  LatencyHistogram h;
  for (int i = 0; i < 10; ++i) h.record(0.004);
  EXPECT_EQ(h.percentile(0.5), 0.004);
  EXPECT_EQ(h.percentile(0.999), 0.004);
}

TEST(LatencyHistogram, OutOfRangeGoesToMinAndMax) {
  LatencyHistogram h;
  h.record(1e-9);
  h.record(5000);
  EXPECT_EQ(h.percentile(0.5), 1e-9);
  EXPECT_EQ(h.percentile(1.0), 5000);
}

TEST(LatencyHistogram, RejectsBadInput) {
  LatencyHistogram h;
  EXPECT_THROW(h.percentile(0.5), Error);
  EXPECT_THROW(h.record(-1), Error);
  EXPECT_THROW(h.record(std::nan("")), Error);
  h.record(1);
  EXPECT_THROW(h.percentile(0), Error);
  EXPECT_THROW(h.percentile(1.5), Error);
  EXPECT_EQ(LatencyHistogram().summary().count, 0);
}

// ---- Run rules

TEST(RunRules, LoadGenDefaults) {
  EXPECT_EQ(loadgen_rules(Scenario::SingleStream).min_count, 1024);
  EXPECT_EQ(loadgen_rules(Scenario::Server).min_count, 270336);
  EXPECT_EQ(loadgen_rules(Scenario::Offline).min_count, 24576);
  for (Scenario s : {Scenario::SingleStream, Scenario::Server, Scenario::Offline})
    EXPECT_EQ(loadgen_rules(s).min_duration_s, 600) << scenario_name(s);
  EXPECT_THROW(rules(10, 1, 5).check(), Error);
  EXPECT_THROW(rules(1, -1).check(), Error);
}

TEST(RunRules, ValidityNamesWhatFellShort) {
  const RunRules small = rules(1, 1, 50);
  EXPECT_EQ(check_loadgen_rules(Scenario::SingleStream, small, {600, 1024, false}).text(), "VALID");
  EXPECT_EQ(check_loadgen_rules(Scenario::SingleStream, small, {599, 1023, false}).text(),
            "INVALID (min duration 600 s, min queries 1024)");
  EXPECT_EQ(check_loadgen_rules(Scenario::Offline, small, {700, 100, true}).text(),
            "INVALID (min samples 24576, stopped at max duration 50 s)");
  const nlohmann::json j = check_loadgen_rules(Scenario::Server, small, {600, 270336, false}).to_json();
  EXPECT_EQ(j["valid"], true);
  EXPECT_TRUE(j["reasons"].empty());
}

// ---- Clocks

TEST(Clock, VirtualMovesOnlyWhenTold) {
  VirtualClock c(5);
  EXPECT_EQ(c.now_s(), 5);
  c.sleep_until_s(4);  // the past: no change
  EXPECT_EQ(c.now_s(), 5);
  c.sleep_until_s(7.5);
  c.advance_s(0.5);
  EXPECT_EQ(c.now_s(), 8);
  EXPECT_THROW(c.advance_s(-1), Error);
}

TEST(Clock, SteadyNeverGoesBack) {
  SteadyClock c;
  const double t = c.now_s();
  c.sleep_until_s(t - 1);  // the past: returns at once
  EXPECT_GE(c.now_s(), t);
}

// ---- SingleStream

TEST(SingleStream, EveryLatencyIsTheServiceTime) {
  VirtualClock clock;
  FakeTarget t(clock, 0.125, 0.125, 8);  // 0.25 s per query
  const SingleStreamResult r = run_single_stream(t, clock, rules(10, 5));
  // Issued at 0, 0.25, ..., 10: the last one at the minimum duration.
  EXPECT_EQ(r.queries, 41);
  EXPECT_EQ(r.duration_s, 10);
  EXPECT_EQ(r.elapsed_s, 10.25);
  EXPECT_EQ(r.qps, 4);
  EXPECT_EQ(r.latency.count, 41);
  for (double l : {r.latency.min_s, r.latency.max_s, r.latency.mean_s, r.latency.p50_s, r.latency.p90_s,
                   r.latency.p99_s})
    EXPECT_EQ(l, 0.25);
  EXPECT_EQ(t.batches, std::vector<int>(41, 1));
  EXPECT_EQ(r.validity.text(), "INVALID (min duration 600 s, min queries 1024)");
}

TEST(SingleStream, RunsUntilTheCountToo) {
  VirtualClock clock;
  FakeTarget t(clock, 0.25, 0, 1);
  const SingleStreamResult r = run_single_stream(t, clock, rules(1, 20));
  EXPECT_EQ(r.queries, 20);
  EXPECT_EQ(r.duration_s, 4.75);
}

TEST(SingleStream, LoadGenRulesMakeItValid) {
  VirtualClock clock(100);  // any origin
  FakeTarget t(clock, 0.25, 0, 1);
  const SingleStreamResult r = run_single_stream(t, clock);
  EXPECT_EQ(r.queries, 2401);  // 0, 0.25, ..., 600
  EXPECT_TRUE(r.validity.valid());
  EXPECT_EQ(r.text(), "SingleStream: p90 250 ms (p50 250 ms, p99 250 ms), 4.0 QPS, 2401 queries in 600.25 s: VALID");
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["latency"]["p99_s"], 0.25);
  EXPECT_EQ(j["validity"]["valid"], true);
}

TEST(SingleStream, MaxDurationStopsARunThatCannotFinish) {
  VirtualClock clock;
  FakeTarget t(clock, 1, 0, 1);
  const SingleStreamResult r = run_single_stream(t, clock, rules(0, int64_t{1} << 50, 10));
  EXPECT_EQ(r.queries, 10);  // issued at 0 .. 9; at 10 the cap has passed
  EXPECT_FALSE(r.validity.valid());
  EXPECT_EQ(r.validity.reasons.back(), "stopped at max duration 10 s");
}

// ---- Offline

TEST(Offline, ThroughputIsBatchOverServiceTime) {
  VirtualClock clock;
  FakeTarget t(clock, 0.5, 1.0 / 128, 64);  // a batch of 64 in 1 s
  const OfflineResult r = run_offline(t, clock);  // the target's max batch, LoadGen's rules
  EXPECT_EQ(r.batch, 64);
  EXPECT_EQ(r.batches, 600);
  EXPECT_EQ(r.samples, 38400);
  EXPECT_EQ(r.samples_per_s, 64);
  EXPECT_EQ(r.text(), "Offline: batch 64, 64.0 samples/s (38400 samples in 600 s): VALID");
}

TEST(Offline, RunsUntilBothMinimums) {
  VirtualClock clock;
  FakeTarget t(clock, 0.5, 1.0 / 128, 64);
  const OfflineResult r = run_offline(t, clock, 16, rules(1, 100));  // 0.625 s a batch
  EXPECT_EQ(r.batches, 7);  // 112 samples >= 100, 4.375 s >= 1 s
  EXPECT_EQ(r.samples_per_s, 16 / 0.625);
  EXPECT_EQ(r.validity.text(), "INVALID (min duration 600 s, min samples 24576)");
  EXPECT_THROW(run_offline(t, clock, 65, rules(1, 1)), Error);
  const OfflineResult capped = run_offline(t, clock, 64, rules(0, int64_t{1} << 50, 5));
  EXPECT_EQ(capped.batches, 5);
  EXPECT_EQ(capped.validity.reasons.back(), "stopped at max duration 5 s");
}

TEST(Offline, SweepGivesThroughputAgainstBatch) {
  VirtualClock clock;
  FakeTarget t(clock, 0.5, 1.0 / 128, 64);
  const OfflineSweep s = sweep_offline(t, clock, {1, 2, 4, 8, 16, 32, 64}, rules(2, 1));
  ASSERT_EQ(s.points.size(), 7u);
  for (size_t i = 0; i < s.points.size(); ++i) {
    const double b = s.points[i].batch;
    EXPECT_NEAR(s.points[i].samples_per_s, b / (0.5 + b / 128), 1e-9 * b);
    if (i) {
      EXPECT_GT(s.points[i].samples_per_s, s.points[i - 1].samples_per_s);
    }
  }
  EXPECT_EQ(s.to_json().size(), 7u);
  const std::string text = s.text();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 7);
}

// ---- Server: the engine on given arrivals

std::vector<QueryTiming> serve_list(FakeTarget& t, VirtualClock& clock, std::vector<double> arrivals,
                                    BatchPolicy policy, double cap = 1e6, ServeCounts* counts = nullptr) {
  ListArrivals list(std::move(arrivals));
  std::vector<QueryTiming> out;
  const ServeCounts c = serve(t, clock, list, policy, cap, [&](const QueryTiming& q) { out.push_back(q); });
  if (counts) *counts = c;
  return out;
}

void expect_query(const QueryTiming& q, double arrival, double start, double done, int batch) {
  EXPECT_EQ(q.arrival_s, arrival);
  EXPECT_EQ(q.start_s, start);
  EXPECT_EQ(q.done_s, done);
  EXPECT_EQ(q.latency_s, done - arrival);
  EXPECT_EQ(q.batch, batch);
}

TEST(Server, HandCheckedBatchesAndQueue) {
  // Service 4 + batch s; max batch 2; a lone query waits at most 5 s.
  //   t=0  q0 arrives, waits for a partner or t=5
  //   t=1  q1 arrives: two wait, batch {q0, q1} runs 1 -> 7
  //   t=2  q2 arrives while busy; at 7 it has waited 5: batch {q2} runs 7 -> 12
  //   t=10, 11  q3, q4 arrive while busy; at 12 two wait: batch {q3, q4} runs 12 -> 18
  VirtualClock clock(3);  // the origin does not matter
  FakeTarget t(clock, 4, 1, 8);
  ServeCounts c;
  const auto q = serve_list(t, clock, {0, 1, 2, 10, 11}, {.max_batch = 2, .timeout_s = 5}, 1e6, &c);
  ASSERT_EQ(q.size(), 5u);
  expect_query(q[0], 0, 1, 7, 2);
  expect_query(q[1], 1, 1, 7, 2);
  expect_query(q[2], 2, 7, 12, 1);
  expect_query(q[3], 10, 12, 18, 2);
  expect_query(q[4], 11, 12, 18, 2);
  EXPECT_EQ(t.batches, (std::vector<int>{2, 1, 2}));
  EXPECT_EQ(c.arrived, 5);
  EXPECT_EQ(c.served, 5);
  EXPECT_EQ(c.batches, 3);
  EXPECT_EQ(c.last_arrival_s, 11);
  EXPECT_EQ(c.last_done_s, 18);
  EXPECT_FALSE(c.capped);
}

// Small schedules checked by hand: the fake's service time (a + b * batch) and max batch, the
// arrivals, the policy, the batches it ran (empty: not checked) and some queries' timings.
struct ServeCase {
  const char* name;
  double a, b;
  int max_batch;
  std::vector<double> arrivals;
  BatchPolicy policy;
  std::vector<int> batches;
  std::vector<std::tuple<size_t, double, double, double, int>> queries;  // index, arrival, start, done, batch
};

TEST(Server, SmallSchedulesCheckedByHand) {
  const ServeCase cases[] = {
      {"a lone query launches at its timeout", 1, 0, 4, {0, 10}, {.max_batch = 4, .timeout_s = 3}, {},
       {{0, 0, 3, 4, 1}, {1, 10, 13, 14, 1}}},
      {"five at once, max batch 2: two full batches back to back, the fifth alone at its timeout", 1, 1, 4,
       {0, 0, 0, 0, 0}, {.max_batch = 2, .timeout_s = 100}, {2, 2, 1}, {{0, 0, 0, 3, 2}, {2, 0, 3, 6, 2}, {4, 0, 100, 102, 1}}},
      {"zero timeout batches what queued while busy", 2, 1, 4, {0, 1, 2, 3}, {.max_batch = 4, .timeout_s = 0}, {1, 3},
       {{0, 0, 0, 3, 1}, {1, 1, 3, 8, 3}, {3, 3, 3, 8, 3}}},
  };
  for (const ServeCase& c : cases) {
    SCOPED_TRACE(c.name);
    VirtualClock clock;
    FakeTarget t(clock, c.a, c.b, c.max_batch);
    const auto q = serve_list(t, clock, c.arrivals, c.policy);
    if (!c.batches.empty()) {
      EXPECT_EQ(t.batches, c.batches);
    }
    for (const auto& [i, arrival, start, done, batch] : c.queries) {
      ASSERT_LT(i, q.size());
      expect_query(q[i], arrival, start, done, batch);
    }
  }
}

TEST(Server, CapLeavesQueriesUnserved) {
  VirtualClock clock;
  FakeTarget t(clock, 1, 0, 1);
  ServeCounts c;
  const auto q = serve_list(t, clock, {0, 1, 20, 30}, {.max_batch = 1, .timeout_s = 0}, 5, &c);
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(c.arrived, 4);
  EXPECT_EQ(c.unserved, 2);
  EXPECT_TRUE(c.capped);
  EXPECT_THROW(serve_list(t, clock, {0}, {.max_batch = 2, .timeout_s = 0}), Error);  // above the target's
}

TEST(Server, ResultOnGivenArrivals) {
  // The hand-checked case: latencies 7, 6, 10, 8, 7; p80 is the 4th smallest, 8.
  ServerSettings s{.latency_bound_s = 8, .latency_percentile = 0.8, .max_batch = 2, .batch_timeout_s = 5,
                   .rules = rules(0, 0)};
  VirtualClock clock;
  FakeTarget t(clock, 4, 1, 8);
  ListArrivals list({0, 1, 2, 10, 11});
  const ServerResult r = run_server(t, clock, s, list);
  EXPECT_EQ(r.queries, 5);
  EXPECT_EQ(r.served, 5);
  EXPECT_EQ(r.batches, 3);
  EXPECT_EQ(r.duration_s, 11);
  EXPECT_DOUBLE_EQ(r.scheduled_qps, 5.0 / 11);
  EXPECT_DOUBLE_EQ(r.completed_qps, 5.0 / 18);
  EXPECT_DOUBLE_EQ(r.mean_batch, 5.0 / 3);
  EXPECT_EQ(r.latency.min_s, 6);
  EXPECT_EQ(r.latency.max_s, 10);
  EXPECT_EQ(r.latency.mean_s, 7.6);
  EXPECT_EQ(r.over_bound, 1);
  EXPECT_TRUE(r.bound_met);
  EXPECT_LE(r.tail_latency_s, 8);
  EXPECT_GE(r.tail_latency_s, 8 / (1 + LatencyHistogram::relative_error()));
  EXPECT_EQ(r.validity.text(), "INVALID (min duration 600 s, min queries 270336)");
  EXPECT_NE(r.text().find("<= 8000 ms bound: INVALID (min duration 600 s, min queries 270336)"), std::string::npos)
      << r.text();

  s.latency_bound_s = 7.5;  // now p80 = 8 is over it
  VirtualClock clock2;
  FakeTarget t2(clock2, 4, 1, 8);
  ListArrivals again({0, 1, 2, 10, 11});
  const ServerResult over = run_server(t2, clock2, s, again);
  EXPECT_FALSE(over.bound_met);
  EXPECT_EQ(over.over_bound, 2);
  EXPECT_GT(over.tail_latency_s, 7.5);
  EXPECT_EQ(over.validity.reasons.back().substr(0, 4), "p80 ");
  EXPECT_NE(over.validity.reasons.back().find("> 7500 ms bound"), std::string::npos);
  EXPECT_EQ(over.to_json()["bound_met"], false);
}

TEST(Server, CappedRunIsInvalidAndMissesTheBound) {
  ServerSettings s{.latency_bound_s = 100, .max_batch = 1, .rules = rules(0, 0, 5)};
  VirtualClock clock;
  FakeTarget t(clock, 1, 0, 1);
  ListArrivals list({0, 1, 20, 30});
  const ServerResult r = run_server(t, clock, s, list);
  EXPECT_EQ(r.unserved, 2);
  EXPECT_FALSE(r.bound_met);
  const auto& why = r.validity.reasons;
  EXPECT_NE(std::find(why.begin(), why.end(), "stopped at max duration 5 s"), why.end());
  EXPECT_NE(std::find(why.begin(), why.end(), "2 queries unserved"), why.end());
}

// ---- Server: Poisson arrivals

std::vector<double> draw(double qps, uint64_t seed, const RunRules& r) {
  PoissonArrivals a(qps, seed, r);
  std::vector<double> out;
  for (double t; a.next(&t);) out.push_back(t);
  return out;
}

TEST(Poisson, MeanRateAndSpreadMatchTheTarget) {
  const std::vector<double> t = draw(1000, 7, rules(0, 200000));
  ASSERT_EQ(t.size(), 200000u);
  const double n = static_cast<double>(t.size());
  EXPECT_NEAR(n / t.back(), 1000, 10);  // within 1% (the standard error is 0.22%)
  double sq = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const double gap = t[i] - (i ? t[i - 1] : 0);
    sq += gap * gap;
  }
  const double mean = t.back() / n;
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean) / mean, 1, 0.02);  // exponential: sd = mean
}

TEST(Poisson, DeterministicForASeedAndScaledByTheRate) {
  const std::vector<double> a = draw(100, 42, rules(0, 1000)), b = draw(100, 42, rules(0, 1000));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, draw(100, 43, rules(0, 1000)));
  const std::vector<double> twice = draw(200, 42, rules(0, 1000));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(twice[i], a[i] / 2, 1e-12 * a[i]);
  EXPECT_THROW(PoissonArrivals(0, 1, rules(0, 1)), Error);
}

TEST(Poisson, StopsWhenBothMinimumsAreMetOrAtTheCap) {
  const std::vector<double> t = draw(1000, 1, rules(10, 5));
  EXPECT_GE(t.back(), 10);
  EXPECT_LT(t[t.size() - 2], 10);
  PoissonArrivals capped(100, 1, rules(0, int64_t{1} << 50, 2));
  double last = 0;
  for (double x; capped.next(&x);) last = x;
  EXPECT_TRUE(capped.capped());
  EXPECT_LE(last, 2);
  EXPECT_NEAR(static_cast<double>(capped.count()), 200, 50);
}

// M/D/1 (one server, deterministic service D, Poisson arrivals at rate l): the probability that a
// query waits at most t (Erlang's formula, as in Iversen, "Teletraffic Engineering and Network
// Planning", the M/D/1 waiting time distribution):
//   P(W <= t) = (1 - rho) * sum_{k=0}^{floor(t/D)} (l (k D - t))^k / k! * exp(-l (k D - t))
double md1_wait_cdf(double l, double d, double t) {
  const double rho = l * d;
  double sum = 0;
  for (int k = 0; k <= static_cast<int>(std::floor(t / d)); ++k) {
    const double x = l * (k * d - t);
    sum += std::pow(x, k) / std::tgamma(k + 1) * std::exp(-x);
  }
  return (1 - rho) * sum;
}

// The rate at which the 99th percentile of latency (wait + D) is exactly `bound`.
double md1_capacity(double d, double bound) {
  double lo = 0.01 / d, hi = 0.9999 / d;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (md1_wait_cdf(mid, d, bound - d) >= 0.99 ? lo : hi) = mid;
  }
  return lo;
}

TEST(Server, MD1WaitFormulaIsSane) {
  EXPECT_NEAR(md1_wait_cdf(500, 1e-3, 0), 0.5, 1e-12);  // P(no wait) = 1 - rho
  EXPECT_GT(md1_wait_cdf(900, 1e-3, 4e-3), md1_wait_cdf(950, 1e-3, 4e-3));
}

TEST(Server, SearchFindsTheMD1Capacity) {
  // D = 1 ms, one query per batch, p99 <= 5 ms: the capacity is where P(W <= 4 ms) = 0.99.
  const double capacity = md1_capacity(1e-3, 5e-3);
  EXPECT_GT(capacity, 500);
  EXPECT_LT(capacity, 1000);
  VirtualClock clock;
  FakeTarget t(clock, 1e-3, 0, 1);
  const ServerSettings s{.latency_bound_s = 5e-3, .seed = 3, .rules = rules(0, 100000)};
  const QpsSearch found = find_peak_qps(t, clock, s, {.start_qps = 100, .precision = 0.005});
  ASSERT_TRUE(found.found);
  EXPECT_LE(found.upper_qps - found.peak_qps, 0.005 * found.peak_qps);
  // Within the search's precision and the sampled p99's error (100000 queries) of the formula.
  EXPECT_NEAR(found.peak_qps / capacity, 1, 0.02) << found.peak_qps << " vs " << capacity;
  // The tail grows with the rate: every rate tried below the peak met the bound, none above.
  for (const QpsTry& q : found.tries) EXPECT_EQ(q.result.bound_met, q.qps <= found.peak_qps) << q.qps;
  ASSERT_NE(found.peak(), nullptr);
  EXPECT_LE(found.peak()->tail_latency_s, 5e-3);
  EXPECT_EQ(found.tries.front().qps, 100);
  EXPECT_EQ(found.to_json()["tries"].size(), found.tries.size());
}

// ---- The QPS search on a synthetic run whose capacity is known exactly

ServerResult met_below(double qps, double capacity) {
  ServerResult r;
  r.target_qps = qps;
  r.bound_met = qps <= capacity;
  return r;
}

TEST(QpsSearch, BracketsUpThenBisectsToThePrecision) {
  const double cap = 123.456;
  const QpsSearch s = find_peak_qps([&](double q) { return met_below(q, cap); }, {.start_qps = 1, .precision = 0.01});
  ASSERT_TRUE(s.found);
  EXPECT_LE(s.peak_qps, cap);
  EXPECT_GT(s.upper_qps, cap);
  EXPECT_LE(s.upper_qps - s.peak_qps, 0.01 * s.peak_qps);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(s.tries[static_cast<size_t>(i)].qps, std::exp2(i));  // 1 .. 128
  EXPECT_EQ(s.tries.size(), 8u + 6u);  // [64, 128] halved 6 times: 1 <= 1% of a peak near 122
}

TEST(QpsSearch, BracketsDownFromATooHighStart) {
  const QpsSearch s = find_peak_qps([&](double q) { return met_below(q, 123.456); }, {.start_qps = 1000});
  ASSERT_TRUE(s.found);
  EXPECT_EQ(s.tries[1].qps, 500);
  EXPECT_EQ(s.tries[3].qps, 125);
  EXPECT_EQ(s.tries[4].qps, 62.5);
  EXPECT_LE(s.peak_qps, 123.456);
  EXPECT_GE(s.peak_qps, 123.456 / 1.01);
}

TEST(QpsSearch, HalvesNoLowerThanTheLowestRate) {
  // 10, 5, 2.5, 1.25 miss; 0.625 would be below min_qps: stop, nothing found.
  const QpsSearch none = find_peak_qps([&](double q) { return met_below(q, 0.1); },
                                       {.start_qps = 10, .min_qps = 1});
  EXPECT_FALSE(none.found);
  ASSERT_EQ(none.tries.size(), 4u);
  EXPECT_EQ(none.tries.back().qps, 1.25);
  // A rate at min_qps itself is still tried, and may meet the bound.
  const QpsSearch at = find_peak_qps([&](double q) { return met_below(q, 1); }, {.start_qps = 8, .min_qps = 1});
  ASSERT_TRUE(at.found);
  EXPECT_EQ(at.tries[3].qps, 1);
  EXPECT_EQ(at.peak_qps, 1);
}

TEST(QpsSearch, NothingMeetsOrNothingMisses) {
  const QpsSearch none = find_peak_qps([&](double q) { return met_below(q, 0); }, {.start_qps = 1});
  EXPECT_FALSE(none.found);
  EXPECT_EQ(none.peak(), nullptr);
  EXPECT_NE(none.text().find("no rate met the bound"), std::string::npos);
  const QpsSearch all = find_peak_qps([&](double q) { return met_below(q, 1e300); }, {.start_qps = 1, .max_runs = 10});
  EXPECT_TRUE(all.found);
  EXPECT_EQ(all.tries.size(), 10u);
  EXPECT_EQ(all.peak_qps, 512);
  EXPECT_EQ(all.upper_qps, 0);
  EXPECT_THROW(find_peak_qps([&](double q) { return met_below(q, 1); }, {.start_qps = 0}), Error);
}

// ---- Server under LoadGen's own rules

TEST(Server, LoadGenRulesAndTheBound) {
  // 500 QPS for 600 s: 300000 queries >= 270336, service 1 ms (rho = 0.5).
  VirtualClock clock;
  FakeTarget t(clock, 1e-3, 0, 1);
  ServerSettings s{.target_qps = 500, .max_batch = 1, .seed = 11};
  const ServerResult ok = run_server(t, clock, s);  // bound 10 ms
  EXPECT_GE(ok.queries, 270336);
  EXPECT_GE(ok.duration_s, 600);
  EXPECT_TRUE(ok.bound_met);
  EXPECT_EQ(ok.validity.text(), "VALID");
  EXPECT_TRUE(ok.text().ends_with("<= 10 ms bound: VALID")) << ok.text();
  s.latency_bound_s = 1.5e-3;  // P(W > 0.5 ms) is far above 1% at rho = 0.5
  const ServerResult over = run_server(t, clock, s);
  EXPECT_FALSE(over.bound_met);
  ASSERT_EQ(over.validity.reasons.size(), 1u);
  EXPECT_NE(over.validity.reasons[0].find("> 1.5 ms bound"), std::string::npos) << over.validity.text();
}

}  // namespace
}  // namespace ringbench::infer
