#include "runner/infer/arrivals.h"

#include <cmath>
#include <string>
#include <utility>

#include "base/errors.h"

namespace ringbench::infer {

PoissonArrivals::PoissonArrivals(double qps, uint64_t seed, const RunRules& rules)
    : qps_(qps), rules_(rules), rng_(seed) {
  if (!(qps > 0 && std::isfinite(qps))) throw Error("Server: target QPS must be > 0, not " + std::to_string(qps));
  rules.check();
}

bool PoissonArrivals::next(double* t_s) {
  if (count_ > 0 && count_ >= rules_.min_count && last_ >= rules_.min_duration_s) return false;
  if (capped_) return false;
  const double u = static_cast<double>(rng_() >> 11) * 0x1p-53;  // [0, 1)
  const double t = last_ - std::log1p(-u) / qps_;
  if (t > rules_.max_duration_s) {
    capped_ = true;
    return false;
  }
  last_ = t;
  ++count_;
  *t_s = t;
  return true;
}

ListArrivals::ListArrivals(std::vector<double> times_s) : times_(std::move(times_s)) {
  for (size_t i = 0; i < times_.size(); ++i)
    if (!(times_[i] >= 0) || (i > 0 && times_[i] < times_[i - 1]))
      throw Error("arrivals: times must be >= 0 and non-decreasing (arrival " + std::to_string(i) + " is " +
                  std::to_string(times_[i]) + " s)");
}

bool ListArrivals::next(double* t_s) {
  if (next_ == times_.size()) return false;
  *t_s = times_[next_++];
  return true;
}

}  // namespace ringbench::infer
