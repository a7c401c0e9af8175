#include "models/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ringbench::models {

namespace {
constexpr double kMaxScale = 0x1p127;  // the largest power of two a float holds
constexpr double kMinScale = 0x1p-24;  // below this a fp16 loss gradient is zero anyway

bool power_of_two(double v) {
  int e = 0;
  return v > 0 && std::frexp(v, &e) == 0.5;
}
}  // namespace

std::optional<LossScaleOptions> parse_loss_scale(const std::string& s) {
  LossScaleOptions o;
  if (s == "none") return o;
  o.enabled = true;
  if (s == "dynamic") return o;
  const std::string prefix = "dynamic:";
  if (s.rfind(prefix, 0) != 0 || s.size() == prefix.size() || s.size() > prefix.size() + 40) return std::nullopt;
  const std::string v = s.substr(prefix.size());
  if (v.find_first_not_of("0123456789.eE+") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double init = std::strtod(v.c_str(), &end);
  if (end != v.c_str() + v.size() || !(init >= 1 && init <= kMaxScale) || !power_of_two(init)) return std::nullopt;
  o.initial = init;
  return o;
}

std::string describe(const LossScaleOptions& o) {
  if (!o.enabled) return "none";
  char buf[160];
  std::snprintf(buf, sizeof buf, "dynamic from %.0f (x0.5 and the step skipped on inf/NaN gradients, x2 after %d good steps)",
                o.initial, o.interval);
  return buf;
}

LossScaler::LossScaler(const LossScaleOptions& o) : o_(o) { c_.scale = o.enabled ? o.initial : 1; }

void LossScaler::update(bool grads_finite) {
  if (!o_.enabled) return;
  c_.lowest = c_.lowest == 0 ? c_.scale : std::min(c_.lowest, c_.scale);
  if (!grads_finite) {
    ++c_.skipped;
    good_in_a_row_ = 0;
    c_.scale = std::max(kMinScale, c_.scale * 0.5);
    return;
  }
  if (++good_in_a_row_ >= o_.interval) {
    good_in_a_row_ = 0;
    if (c_.scale < kMaxScale) {
      c_.scale *= 2;
      ++c_.raised;
    }
  }
}

}  // namespace ringbench::models
