// The processes of a job that ringbench starts itself, and the one rule by which it waits for
// them (reap_processes): a sweep point's ranks (run_ranks, below) and `--ranks N`'s local ranks
// (launch_local, world.h).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ringbench {

// How reap_processes waits. Every process is reaped as it exits. When one fails, the others get
// `grace` to report their own errors; at `deadline`, once *stop is set, or `grace` after the
// first `essential` processes all ended (the others: helpers such as a standby), every process
// still running is killed.
struct ReapRule {
  std::chrono::milliseconds grace{0};
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  const std::atomic<bool>* stop = nullptr;
  size_t essential = SIZE_MAX;
  // Each process leads its own process group (a launcher such as mpirun dies with its whole
  // tree): SIGTERM to the group, then SIGKILL a second later. Otherwise SIGKILL to the process.
  bool groups = false;
};

// Why reap_processes killed what was still running.
enum class KillCause { failure, essential_ended, deadline, stop };

struct Reaped {
  std::vector<int> exit_codes;  // per process: 128+signal when killed; -1 when never reaped
  int first_failure = 0;        // the first nonzero exit code, in the order they were reaped
  bool timed_out = false;       // killed at the deadline
  bool interrupted = false;     // killed because *stop became true
  int lost_errno = 0;           // waitpid failed (with this errno): everything was killed
};

// Waits for every process of `pids` under `rule`. `on_kill` (may be empty) hears why the rest
// is about to be killed, with the pids still running (0: reaped); `on_exit` each exit as it is
// reaped (index, waitpid status).
Reaped reap_processes(std::vector<pid_t> pids, const ReapRule& rule,
                      const std::function<void(KillCause, const std::vector<pid_t>&)>& on_kill = {},
                      const std::function<void(size_t, int)>& on_exit = {});

struct RankLaunch {
  std::vector<std::string> argv;  // argv[0] is the executable's path, unless `exe` says another
  std::string exe;                // what to exec ("": argv[0])
  std::vector<std::string> env;   // "NAME=value", added to this process's environment
  std::vector<std::string> unset; // prefixes: inherited variables whose names start so are dropped
  std::string log_path;           // stdout and stderr go here, stdin is /dev/null ("": all inherited)
  int netns_fd = -1;              // setns(CLONE_NEWNET) into it before exec
  std::vector<int> cpus;          // sched_setaffinity before exec (empty: no pinning)
  // Leads a process group of its own (a launcher such as mpirun then dies with its whole tree);
  // else it stays in ours, so that Ctrl-C and `kill -- -PGID` reach it too.
  bool own_group = true;
};

// Forks and execs one process as `rl` says. It dies with this process, however this one ends
// (SIGKILL included). Throws Error when its log cannot be created or fork fails.
pid_t start_process(const RankLaunch& rl);

struct LaunchOutcome {
  std::vector<int> exit_codes;  // per rank; 128+signal when killed; -1 when it never started
  bool timed_out = false;
  bool interrupted = false;     // *stop became true
  double wall_s = 0;
  bool ok() const;
};

// Starts the ranks of one sweep point as child processes and waits for them with a deadline:
// each in its own process group (so a launcher such as mpirun dies with its whole tree), with
// its output in a log file, optionally inside a network namespace and pinned to CPUs. Runs
// every rank to completion under reap_processes' rule: when one fails the others get `grace` to
// report their own errors; after `timeout`, or once *stop is set, every rank still running is
// killed (SIGTERM, then SIGKILL a second later).
LaunchOutcome run_ranks(const std::vector<RankLaunch>& ranks, std::chrono::milliseconds timeout,
                        std::chrono::milliseconds grace, const std::atomic<bool>* stop);

// The last `max_lines` lines of a file that mention an error (or its last lines when none do).
std::string error_lines(const std::string& path, size_t max_lines = 3);

// This executable's absolute path (readlink /proc/self/exe).
std::string self_exe();

}  // namespace ringbench
