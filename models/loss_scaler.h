// Dynamic loss scaling, as PyTorch's GradScaler and Apex's amp do it: fp16's gradients underflow
// below 6e-8, so the loss gradient is multiplied by a scale S before backward and the averaged
// gradients divided by S before the optimizer. A step whose averaged gradients hold an inf or a
// NaN is skipped (parameters, momentum and the step's update left untouched) and S halved;
// after `interval` good steps in a row S doubles. S stays a power of two, so scaling and
// unscaling are exact in binary floating point: without overflow, a scaled fp32 step equals the
// unscaled one bit for bit.
//
// Every rank decides alike without a message of its own: the decision reads the *averaged*
// gradients, identical on every rank, and an inf or NaN on any rank makes the sum inf or NaN.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ringbench::models {

struct LossScaleOptions {
  bool enabled = false;
  double initial = 65536;  // 2^16, GradScaler's init_scale
  int interval = 2000;     // good steps before the scale doubles (GradScaler's growth_interval)
};
// "none", "dynamic" or "dynamic:INIT" (INIT a power of two from 1 to 2^127); nothing otherwise.
std::optional<LossScaleOptions> parse_loss_scale(const std::string& s);
std::string describe(const LossScaleOptions& o);  // "none" or "dynamic from 65536 (x0.5 on ...)"

struct LossScaleCounts {
  double scale = 1;        // the scale the next step will use
  int64_t skipped = 0;     // steps skipped for inf/NaN gradients (each halved the scale)
  int64_t raised = 0;      // times the scale doubled
  double lowest = 0;       // the lowest scale used so far (0: no step yet)
};

class LossScaler {
 public:
  explicit LossScaler(const LossScaleOptions& o);
  bool enabled() const { return o_.enabled; }
  double scale() const { return c_.scale; }
  // After a step's gradients were found finite (true) or not: skips are counted, the scale moves.
  void update(bool grads_finite);
  const LossScaleCounts& counts() const { return c_; }
  const LossScaleOptions& options() const { return o_; }

 private:
  LossScaleOptions o_;
  LossScaleCounts c_;
  int good_in_a_row_ = 0;
};

}  // namespace ringbench::models
