#include "runner/infer/latency_histogram.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/errors.h"

namespace ringbench::infer {

namespace {
// Log buckets covering [kLowS, kHighS]: ceil(16 * log2(1e9)) = 479.
int log_buckets() {
  static const int n = static_cast<int>(
      std::ceil(LatencyHistogram::kPerOctave * std::log2(LatencyHistogram::kHighS / LatencyHistogram::kLowS)));
  return n;
}
}  // namespace

int64_t quantile_rank(double p, int64_t n) {
  const double x = p * static_cast<double>(n);
  const auto rank = static_cast<int64_t>(std::ceil(x - 1e-9 * std::max(1.0, x)));
  return std::clamp<int64_t>(rank, 1, std::max<int64_t>(n, 1));
}

double LatencyHistogram::relative_error() { return std::exp2(1.0 / (2 * kPerOctave)) - 1; }

LatencyHistogram::LatencyHistogram() : counts_(static_cast<size_t>(log_buckets()) + 2, 0) {}

int LatencyHistogram::bucket_of(double seconds) const {
  if (seconds < kLowS) return 0;
  const double i = std::floor(kPerOctave * std::log2(seconds / kLowS));
  if (i >= log_buckets()) return log_buckets() + 1;
  return static_cast<int>(i) + 1;
}

// The bucket's geometric midpoint, clamped to what was recorded: the true value lies in both the
// bucket and [min, max], so clamping only brings the estimate closer.
double LatencyHistogram::estimate(int bucket) const {
  if (bucket == 0) return min_;
  if (bucket == log_buckets() + 1) return max_;
  const double mid = kLowS * std::exp2((bucket - 1 + 0.5) / kPerOctave);
  return std::clamp(mid, min_, max_);
}

void LatencyHistogram::record(double seconds) {
  if (!(seconds >= 0)) throw Error("latency histogram: bad latency " + std::to_string(seconds) + " s");
  ++counts_[static_cast<size_t>(bucket_of(seconds))];
  min_ = count_ == 0 ? seconds : std::min(min_, seconds);
  max_ = count_ == 0 ? seconds : std::max(max_, seconds);
  sum_ += seconds;
  ++count_;
}

double LatencyHistogram::mean_s() const { return count_ == 0 ? 0 : sum_ / static_cast<double>(count_); }

double LatencyHistogram::percentile(double p) const {
  if (count_ == 0) throw Error("latency histogram: no latencies recorded");
  if (!(p > 0 && p <= 1)) throw Error("latency histogram: percentile " + std::to_string(p) + " is not in (0, 1]");
  const int64_t rank = quantile_rank(p, count_);
  int64_t seen = 0;
  for (size_t b = 0; b < counts_.size(); ++b) {
    seen += counts_[b];
    if (seen >= rank) return estimate(static_cast<int>(b));
  }
  return max_;  // not reached: the counts add up to count_
}

LatencySummary LatencyHistogram::summary() const {
  LatencySummary s;
  if (count_ == 0) return s;
  s.count = count_;
  s.mean_s = mean_s();
  s.min_s = min_;
  s.max_s = max_;
  s.p50_s = percentile(0.50);
  s.p90_s = percentile(0.90);
  s.p95_s = percentile(0.95);
  s.p99_s = percentile(0.99);
  s.p999_s = percentile(0.999);
  return s;
}

nlohmann::json LatencySummary::to_json() const {
  return {{"count", count}, {"mean_s", mean_s}, {"min_s", min_s},   {"max_s", max_s},
          {"p50_s", p50_s}, {"p90_s", p90_s},   {"p95_s", p95_s},   {"p99_s", p99_s},
          {"p999_s", p999_s}};
}

}  // namespace ringbench::infer
