// When the Server scenario's queries arrive, in seconds from the run's start.
//
// PoissonArrivals is LoadGen's Server schedule (test_settings.h: "Queries have a random poisson
// (non-uniform) arrival rate that, when averaged, hits the target QPS"): exponential gaps of mean
// 1/qps drawn by inversion, -ln(1 - u) / qps, from std::mt19937_64's 53-bit uniforms u. Inversion
// rather than std::exponential_distribution, whose algorithm the standard leaves to each library:
// the same seed gives the same schedule everywhere, and the same gaps scaled by 1/qps at every
// rate, so a higher rate never makes a query's wait shorter (the QPS search relies on that).
// It stops once the rules' minimum count and minimum duration are both met (the last arrival at
// or after min_duration_s, LoadGen's "final query scheduled time") or, short of them, before the
// first arrival past max_duration_s (capped()).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "runner/infer/run_rules.h"

namespace ringbench::infer {

class Arrivals {
 public:
  virtual ~Arrivals() = default;
  // The next arrival time, never earlier than the last one; false when there are no more.
  virtual bool next(double* t_s) = 0;
  // Whether it stopped at a cap, short of the minimums it was to meet.
  virtual bool capped() const { return false; }
};

class PoissonArrivals : public Arrivals {
 public:
  PoissonArrivals(double qps, uint64_t seed, const RunRules& rules);  // Error unless qps > 0
  bool next(double* t_s) override;
  int64_t count() const { return count_; }  // arrivals given so far
  bool capped() const override { return capped_; }

 private:
  double qps_;
  RunRules rules_;
  std::mt19937_64 rng_;
  double last_ = 0;
  int64_t count_ = 0;
  bool capped_ = false;
};

// A given list, for traces and hand-checked tests.
class ListArrivals : public Arrivals {
 public:
  explicit ListArrivals(std::vector<double> times_s);  // Error if negative or decreasing
  bool next(double* t_s) override;

 private:
  std::vector<double> times_;
  size_t next_ = 0;
};

}  // namespace ringbench::infer
