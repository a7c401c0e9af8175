// Runs a shell command for end-to-end tests of the ringbench binary; captures its output.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ringbench::testing {

// Unique per process and call: ctest runs tests of one binary as concurrent processes. Every path
// lies in one directory of this process, removed with all it holds when the process exits, so a
// test leaves nothing behind in the temporary directory whatever suffix it adds.
inline std::string temp_path(const std::string& name) {
  static const std::string dir = [] {
    std::string d = ::testing::TempDir() + "ringbench-test-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(::testing::TempDir() + "ringbench-test-" + std::to_string(getpid()), ignored);
    });
    return d + "/";
  }();
  static int counter = 0;
  return dir + name + "_" + std::to_string(counter++);
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
