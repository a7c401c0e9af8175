// Runs a shell command for end-to-end tests of the ringbench binary; captures its output.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ringbench::testing {

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& cmd) {
  std::string out_file = ::testing::TempDir() + "cmd_output_" + std::to_string(std::rand()) + ".txt";
  int status = std::system((cmd + " >" + out_file + " 2>&1").c_str());
  std::ifstream in(out_file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove(out_file.c_str());
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, ss.str()};
}

inline std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + name + "_" + std::to_string(std::rand());
}

}  // namespace ringbench::testing
