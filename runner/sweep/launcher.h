// Starts the ranks of one sweep point as child processes and waits for them with a deadline:
// each in its own process group (so a launcher such as mpirun dies with its whole tree), with
// its output in a log file, optionally inside a network namespace and pinned to CPUs.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace ringbench {

struct RankLaunch {
  std::vector<std::string> argv;  // argv[0] is the executable's path
  std::vector<std::string> env;   // "NAME=value", added to this process's environment
  std::vector<std::string> unset; // prefixes: inherited variables whose names start so are dropped
  std::string log_path;           // stdout and stderr go here
  int netns_fd = -1;              // setns(CLONE_NEWNET) into it before exec
  std::vector<int> cpus;          // sched_setaffinity before exec (empty: no pinning)
};

struct LaunchOutcome {
  std::vector<int> exit_codes;  // per rank; 128+signal when killed; -1 when it never started
  bool timed_out = false;
  bool interrupted = false;     // *stop became true
  double wall_s = 0;
  bool ok() const;
};

// Runs every rank to completion. When one fails the others get `grace` to report their own
// errors; after `timeout`, or once *stop is set, every rank still running is killed (SIGTERM,
// then SIGKILL a second later).
LaunchOutcome run_ranks(const std::vector<RankLaunch>& ranks, std::chrono::milliseconds timeout,
                        std::chrono::milliseconds grace, const std::atomic<bool>* stop);

// The last `max_lines` lines of a file that mention an error (or its last lines when none do).
std::string error_lines(const std::string& path, size_t max_lines = 3);

// This executable's absolute path (readlink /proc/self/exe).
std::string self_exe();

}  // namespace ringbench
