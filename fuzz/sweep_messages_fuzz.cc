// libFuzzer: the messages sweep ranks read from the store under mpirun (runner/sweep/sweep_messages.cc):
// a point result and a command from rank 0. Any bytes give a checked message or an Error.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/errors.h"
#include "runner/sweep/sweep_messages.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string raw(reinterpret_cast<const char*>(data), size);
  try {
    ringbench::point_result(raw, "sweep/res/1/1", 1);
  } catch (const ringbench::Error&) {
  }
  const nlohmann::json cmd = nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (cmd.is_object()) {
    try {
      ringbench::parse_command(cmd, 1, 40);
    } catch (const ringbench::Error&) {
    }
  }
  ringbench::valid_host_name(raw);
  return 0;
}
