#include "base/bytes.h"

#include "base/errors.h"

namespace ringbench {

size_t parse_bytes(const std::string& s) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (...) {
    throw Error("'" + s + "' is not a size (examples: 4096, 4K, 1M, 2G)");
  }
  std::string unit = s.substr(pos);
  double mult = 1;
  if (unit == "K" || unit == "k" || unit == "KiB") mult = 1024.0;
  else if (unit == "M" || unit == "m" || unit == "MiB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "g" || unit == "GiB") mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B") throw Error("'" + s + "': unknown unit '" + unit + "' (use K, M or G)");
  if (!(v >= 0) || v * mult > 1e15) throw Error("'" + s + "' is not a size between 0 and 1P");
  return static_cast<size_t>(v * mult);
}

}  // namespace ringbench
