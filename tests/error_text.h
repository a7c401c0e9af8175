// What an error says, for tests that check the message (no JSON here: test targets that do not
// link nlohmann's JSON include this rather than run_command.h).
#pragma once

#include <exception>
#include <string>

namespace ringbench::testing {

// The message of the E that f throws ("" if none).
template <class E = std::exception, class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace ringbench::testing
