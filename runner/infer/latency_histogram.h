// Every query's latency (arrival to completion), in log-spaced buckets: 16 per octave (each bucket
// 2^(1/16) = 1.044 times as wide as the last) from 1 us to 1000 s, plus one bucket below and one
// above. Constant memory however long the run (LoadGen keeps every latency; a 600 s Server run at
// 10k QPS is 6 million of them).
//
// Percentiles are nearest-rank (the smallest recorded latency with at least p of all at or below
// it), estimated as their bucket's geometric midpoint clamped to [min, max]: within
// relative_error() = 2^(1/32) - 1 = 2.2% of the exact value for latencies in [1 us, 1000 s]
// (below 1 us: min, above: max). Exact when all latencies are equal. Count, mean, min and max
// are exact.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringbench::infer {

// The rank (1-based) of the p-quantile among n values, nearest-rank: ceil(p * n), at least 1,
// with p * n's rounding error forgiven (0.99 * 100 is rank 99, not 100).
int64_t quantile_rank(double p, int64_t n);

struct LatencySummary {
  int64_t count = 0;
  double mean_s = 0, min_s = 0, max_s = 0;
  double p50_s = 0, p90_s = 0, p95_s = 0, p99_s = 0, p999_s = 0;  // estimates (see above)
  nlohmann::json to_json() const;
};

class LatencyHistogram {
 public:
  static constexpr double kLowS = 1e-6;   // the first bucket's lower edge
  static constexpr double kHighS = 1e3;   // the last bucket's upper edge is at least this
  static constexpr int kPerOctave = 16;
  static double relative_error();         // the percentiles' bound: 2^(1/(2 * kPerOctave)) - 1

  LatencyHistogram();
  void record(double seconds);            // Error for a negative or NaN latency
  int64_t count() const { return count_; }
  double mean_s() const;                  // 0 when empty
  double min_s() const { return min_; }   // 0 when empty
  double max_s() const { return max_; }
  double percentile(double p) const;      // p in (0, 1]; Error when empty or p is outside
  LatencySummary summary() const;         // all zero when empty

 private:
  int bucket_of(double seconds) const;
  double estimate(int bucket) const;

  std::vector<int64_t> counts_;  // [0]: below kLowS, [1, n]: the log buckets, [n + 1]: above
  int64_t count_ = 0;
  double sum_ = 0, min_ = 0, max_ = 0;
};

}  // namespace ringbench::infer
