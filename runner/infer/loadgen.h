// The scenarios of MLPerf Inference's LoadGen (mlcommons/inference, loadgen/test_settings.h and
// inference_rules.adoc, "Scenarios"), run against an InferTarget on a Clock:
//   SingleStream  one query of one sample at a time, the next issued when the last completes;
//                 LoadGen's metric is the 90th percentile latency (mlperf.conf
//                 *.SingleStream.target_latency_percentile = 90).
//   Offline       every sample available at once; ringbench issues batches of B back to back and
//                 reports samples/s (LoadGen's metric: "Measured throughput").
//   Server        single-sample queries arriving as a Poisson process at a target QPS (arrivals.h),
//                 batched dynamically (BatchPolicy); valid only if the 99th percentile latency
//                 meets the benchmark's bound (results.cc, PerfConstraintsMet; mlperf.conf
//                 *.Server.target_latency = 10 ms by default, resnet50 15 ms). Its metric is the
//                 highest QPS that is valid: find_peak_qps.
// Latency is from a query's arrival (its scheduled time: "from when the LoadGen was scheduled to
// pass a query to the SUT", inference_rules.adoc) to its completion. Every run follows RunRules
// (run_rules.h) and says whether it is valid under LoadGen's; the numbers are reported either way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/infer/arrivals.h"
#include "runner/infer/clock.h"
#include "runner/infer/infer_target.h"
#include "runner/infer/latency_histogram.h"
#include "runner/infer/run_rules.h"

namespace ringbench::infer {

// ---- SingleStream

struct SingleStreamResult {
  int64_t queries = 0;
  double duration_s = 0;  // LoadGen's: the last query's issue time, from the start
  double elapsed_s = 0;   // the start to the last completion
  double qps = 0;         // queries / elapsed_s
  LatencySummary latency;
  Validity validity;
  nlohmann::json to_json() const;
  // "SingleStream: p90 4.00 ms (p50 4.00 ms, p99 4.00 ms), 250.0 QPS, 2401 queries in 600 s: VALID"
  std::string text() const;
};

SingleStreamResult run_single_stream(InferTarget& target, Clock& clock,
                                     const RunRules& rules = loadgen_rules(Scenario::SingleStream));

// ---- Offline

struct OfflineResult {
  int batch = 0;
  int64_t samples = 0, batches = 0;
  double duration_s = 0;  // the start to the last batch's completion (LoadGen: max latency)
  double samples_per_s = 0;
  Validity validity;
  nlohmann::json to_json() const;
  // "Offline: batch 64, 64.0 samples/s (38400 samples in 600 s): VALID"
  std::string text() const;
};

// Batches of `batch` samples (0: the target's max_batch()) back to back, until both minimums
// are met. Error unless 1 <= batch <= max_batch().
OfflineResult run_offline(InferTarget& target, Clock& clock, int batch = 0,
                          const RunRules& rules = loadgen_rules(Scenario::Offline));

// Throughput against batch: one Offline run per batch size, in the order given.
struct OfflineSweep {
  std::vector<OfflineResult> points;
  nlohmann::json to_json() const;  // [point, ...]
  std::string text() const;        // one line per point
};
OfflineSweep sweep_offline(InferTarget& target, Clock& clock, const std::vector<int>& batches,
                           const RunRules& rules = loadgen_rules(Scenario::Offline));

// ---- Server

// Dynamic batching: when the target is free, a batch is launched as soon as max_batch queries
// wait or the oldest waiting query has waited timeout_s; it takes up to max_batch of the oldest.
// The target serves one batch at a time, so queries queue while it is busy.
struct BatchPolicy {
  int max_batch = 1;
  double timeout_s = 0;  // 0: launch whatever waits as soon as the target is free
};

struct QueryTiming {  // seconds from serve()'s start
  double arrival_s = 0, start_s = 0, done_s = 0, latency_s = 0;
  int batch = 0;  // the size of the batch it ran in
};

struct ServeCounts {
  int64_t arrived = 0, served = 0, unserved = 0, batches = 0;
  double last_arrival_s = 0, last_done_s = 0;
  bool capped = false;  // queries were left when max_duration_s passed
};

// The Server scenario's engine: runs `arrivals` through `policy` on `target`, calling `done` for
// every query served. No batch is launched at or after max_duration_s; queries still waiting then,
// and arrivals not yet given, are counted unserved.
ServeCounts serve(InferTarget& target, Clock& clock, Arrivals& arrivals, const BatchPolicy& policy,
                  double max_duration_s, const std::function<void(const QueryTiming&)>& done);

struct ServerSettings {
  double target_qps = 1;
  double latency_bound_s = 0.010;    // mlperf.conf *.Server.target_latency = 10 (ms)
  double latency_percentile = 0.99;  // mlperf.conf *.Server.target_latency_percentile = 99
  int max_batch = 0;                 // 0: the target's max_batch()
  double batch_timeout_s = 0;
  uint64_t seed = 0;                 // the Poisson schedule's (LoadGen's schedule_rng_seed)
  RunRules rules = loadgen_rules(Scenario::Server);
};

struct ServerResult {
  double target_qps = 0, latency_bound_s = 0, latency_percentile = 0;
  int max_batch = 0;
  double batch_timeout_s = 0;
  int64_t queries = 0, served = 0, unserved = 0, batches = 0;
  double duration_s = 0;       // LoadGen's: the last query's scheduled arrival
  double scheduled_qps = 0;    // queries / duration_s
  double completed_qps = 0;    // served / the last completion
  double mean_batch = 0;
  LatencySummary latency;
  double tail_latency_s = 0;   // at latency_percentile (an estimate, on the right side of the bound)
  int64_t over_bound = 0;      // queries slower than the bound (exact)
  bool bound_met = false;      // the percentile is within the bound (exact) and none went unserved
  Validity validity;           // LoadGen's minimums, the cap and the bound
  nlohmann::json to_json() const;
  // "Server: 123.4 QPS target (122.0 scheduled, 270336 queries, mean batch 3.10), p99 14.2 ms
  //  <= 15 ms bound: VALID"
  std::string text() const;
};

// Poisson arrivals at settings.target_qps (seeded), until the rules' minimums are met.
ServerResult run_server(InferTarget& target, Clock& clock, const ServerSettings& settings);
// The same on given arrivals (settings.target_qps, seed and the rules' minimums unused but for
// the validity check and the report).
ServerResult run_server(InferTarget& target, Clock& clock, const ServerSettings& settings, Arrivals& arrivals);

// ---- The Server's peak QPS (LoadGen's FindPeakPerformance mode, loadgen.cc FindBoundaries and
// FindPeakPerformanceBinarySearch): from start_qps, double the rate until a run misses the bound
// (or halve it until one meets it), then bisect between the last rate that met it and the first
// that did not until they are within `precision` of each other, relatively (LoadGen stops at an
// absolute server_find_peak_qps_decimals_of_precision instead). Assumes the tail latency grows
// with the rate, which PoissonArrivals' scaled schedule guarantees for a deterministic target.

struct QpsSearchSettings {
  double start_qps = 1;
  double precision = 0.01;  // stop when upper - lower <= precision * lower
  int max_runs = 60;
  // Halving stops before a rate below this one (0: only the 2^-30 limit): where queries arrive
  // so far apart that they seldom queue, a lower rate cannot meet a bound this one missed, and
  // each run would only take longer (its minimum query count at a lower rate).
  double min_qps = 0;
};

struct QpsTry {
  double qps = 0;
  ServerResult result;
};

struct QpsSearch {
  std::vector<QpsTry> tries;   // in the order run
  bool found = false;          // some rate met the bound
  double peak_qps = 0;         // the highest rate that met it (the bracket's lower end)
  double upper_qps = 0;        // the lowest rate that missed it (0: none did within max_runs)
  const ServerResult* peak() const;  // its run, nullptr when !found
  nlohmann::json to_json() const;
  std::string text() const;    // one line per try, then the peak
};

QpsSearch find_peak_qps(InferTarget& target, Clock& clock, const ServerSettings& settings,
                        const QpsSearchSettings& search = {});
// The search alone, over any run (the rate in, its result out: bound_met is what it reads).
QpsSearch find_peak_qps(const std::function<ServerResult(double qps)>& run_at, const QpsSearchSettings& search);

}  // namespace ringbench::infer
