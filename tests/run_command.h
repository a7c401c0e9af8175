// Runs a shell command for end-to-end tests of the ringbench binary; captures its output.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ringbench::testing {

// Unique per process and call: ctest runs tests of one binary as concurrent processes.
inline std::string temp_path(const std::string& name) {
  static int counter = 0;
  return ::testing::TempDir() + name + "_" + std::to_string(getpid()) + "_" +
         std::to_string(counter++);
}

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& cmd) {
  std::string out_file = temp_path("cmd_output") + ".txt";
  int status = std::system((cmd + " >" + out_file + " 2>&1").c_str());
  std::ifstream in(out_file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove(out_file.c_str());
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, ss.str()};
}



}  // namespace ringbench::testing
