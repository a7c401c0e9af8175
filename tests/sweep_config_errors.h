// Sweep config tests: what parsing a config says when it refuses it.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/errors.h"
#include "runner/sweep/sweep_config.h"

namespace ringbench::testing {

// A config with a name and a local cluster, then `rest`: all a test of one section needs.
inline std::string local_config(const std::string& rest) { return "name: t\ncluster: {type: local}\n" + rest; }

// The error message of parsing `yaml` (as test.yaml), or "" when it parses.
inline std::string error_of(const std::string& yaml) {
  try {
    parse_sweep_config(yaml, "test.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Parsing `yaml` fails with an error that names the file and says every one of `parts`.
inline void expect_error(const std::string& yaml, const std::vector<std::string>& parts) {
  const std::string e = error_of(yaml);
  ASSERT_FALSE(e.empty()) << "accepted:\n" << yaml;
  EXPECT_EQ(e.rfind("test.yaml: ", 0), 0u) << e;
  for (const auto& p : parts) EXPECT_NE(e.find(p), std::string::npos) << "'" << p << "' not in: " << e;
}

}  // namespace ringbench::testing
