// libFuzzer: the sweep config parser (runner/sweep/sweep_config.cc). Any input is either a config or
// an Error naming what is wrong; a config expands to its points (bounded before expanding) and
// survives its own round trip: to_yaml, parsed again, gives the same config.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/errors.h"
#include "runner/sweep/sweep_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringbench;
  const std::string text(reinterpret_cast<const char*>(data), size);
  SweepConfig config;
  try {
    config = parse_sweep_config(text, "fuzz.yaml");
    expand_points(config);
  } catch (const Error&) {
    return 0;  // a clear error is the answer to bad input
  }
  const std::string yaml = to_yaml(config);
  try {
    if (to_json(parse_sweep_config(yaml, "round-trip.yaml")) == to_json(config)) return 0;
    std::fprintf(stderr, "to_yaml does not round-trip:\n%s", yaml.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "to_yaml wrote a config its parser rejects: %s\n%s", e.what(), yaml.c_str());
  }
  std::abort();
}
