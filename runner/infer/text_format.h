// Numbers in the scenarios' text lines (internal to runner/infer/).
#pragma once

#include <cstdio>
#include <string>

namespace ringbench::infer {

// "%.*f" with `decimals` decimals.
inline std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Seconds as milliseconds, three significant digits where they fit: "4.00 ms", "14.2 ms", "4000 ms".
inline std::string ms(double s) {
  const double v = s * 1e3;
  return fixed(v, v >= 100 ? 0 : v >= 10 ? 1 : 2) + " ms";
}

// The shortest form: "15 ms" (a bound), "600 s".
inline std::string shortest(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// "p99", "p99.9", "p90".
inline std::string percentile_label(double p) { return "p" + shortest(100 * p); }

}  // namespace ringbench::infer
