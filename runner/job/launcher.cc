#include "runner/job/launcher.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <thread>

#include "base/errors.h"

namespace ringbench {
namespace {

using Clock = std::chrono::steady_clock;

// After fork, before exec: only async-signal-safe calls. Everything was prepared by the parent.
[[noreturn]] void exec_child(const char* exe, char* const* argv, char* const* envp, int log_fd, int netns_fd,
                             const cpu_set_t* cpus, bool own_group, pid_t parent) {
  if (own_group) setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed sweep or launch takes its ranks along
  if (getppid() != parent) _exit(127);  // it died before prctl()
  if (log_fd >= 0) {
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  }
  if (netns_fd >= 0 && setns(netns_fd, CLONE_NEWNET) != 0) {
    static const char msg[] = "ringbench: setns into the node's network namespace failed\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(126);
  }
  if (cpus) sched_setaffinity(0, sizeof(cpu_set_t), cpus);
  execve(exe, argv, envp);
  static const char msg[] = "ringbench: exec of the rank failed\n";
  (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
  _exit(127);
}

void signal_group(pid_t pid, int sig) {
  if (pid > 0) kill(-pid, sig);  // the child leads its own process group
}

// This process's environment without the rank's `unset` prefixes, with its `env` set.
std::vector<std::string> rank_environment(const RankLaunch& rl) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  for (const auto& prefix : rl.unset)
    std::erase_if(env_strings, [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
  for (const auto& kv : rl.env) {
    const std::string name = kv.substr(0, kv.find('=') + 1);
    std::erase_if(env_strings, [&](const std::string& s) { return s.rfind(name, 0) == 0; });
    env_strings.push_back(kv);
  }
  return env_strings;
}

// execve()'s form of `strings` (which must outlive it): pointers, then a null.
std::vector<char*> exec_array(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

bool LaunchOutcome::ok() const {
  if (timed_out || interrupted) return false;
  for (int c : exit_codes)
    if (c != 0) return false;
  return true;
}

std::string self_exe() {
  char buf[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Error(std::string("cannot resolve this executable (readlink /proc/self/exe): ") + std::strerror(errno));
  return std::string(buf, size_t(n));
}

pid_t start_process(const RankLaunch& rl) {
  const std::vector<std::string> env_strings = rank_environment(rl);
  std::vector<char*> argv = exec_array(rl.argv), envp = exec_array(env_strings);
  const std::string& exe = rl.exe.empty() ? rl.argv.at(0) : rl.exe;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : rl.cpus) CPU_SET(c, &set);
  int log_fd = -1;
  if (!rl.log_path.empty()) {
    // A results directory may be shared: a link planted as a log is never followed (O_NOFOLLOW)
    // and an old log is replaced, never truncated in place.
    unlink(rl.log_path.c_str());
    log_fd = open(rl.log_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (log_fd < 0) throw Error("cannot create the log file " + rl.log_path + ": " + std::strerror(errno));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0)
    exec_child(exe.c_str(), argv.data(), envp.data(), log_fd, rl.netns_fd, rl.cpus.empty() ? nullptr : &set,
               rl.own_group, parent);
  if (log_fd >= 0) close(log_fd);
  if (pid < 0) throw Error(std::string("fork failed: ") + std::strerror(errno));
  if (rl.own_group) setpgid(pid, pid);  // also here, so signal_group() works before the child gets to it
  return pid;
}

Reaped reap_processes(std::vector<pid_t> pids, const ReapRule& rule,
                      const std::function<void(KillCause, const std::vector<pid_t>&)>& on_kill,
                      const std::function<void(size_t, int)>& on_exit) {
  Reaped out;
  out.exit_codes.assign(pids.size(), -1);
  const size_t essential = std::min(rule.essential, pids.size());
  size_t alive = pids.size(), essential_alive = essential;
  auto kill_at = rule.deadline;  // everything still running is killed at this time
  KillCause cause = KillCause::deadline;
  bool killed = false;
  Clock::time_point force_at = Clock::time_point::max();  // SIGKILL after a SIGTERM
  auto kill_all = [&](int sig) {
    for (pid_t p : pids)
      if (p > 0) rule.groups ? signal_group(p, sig) : void(kill(p, sig));
  };
  while (alive > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      const size_t r = size_t(std::find(pids.begin(), pids.end(), pid) - pids.begin());
      if (r == pids.size()) continue;  // not ours
      pids[r] = 0;                     // reaped: never signal this pid again
      --alive;
      if (r < essential) --essential_alive;
      out.exit_codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      if (on_exit) on_exit(r, status);
      const auto now = Clock::now();
      if (out.exit_codes[r] != 0 && out.first_failure == 0) {
        out.first_failure = out.exit_codes[r];
        if (now + rule.grace < kill_at) kill_at = now + rule.grace, cause = KillCause::failure;
      }
      if (essential_alive == 0 && alive > 0 && now + rule.grace < kill_at)
        kill_at = now + rule.grace, cause = KillCause::essential_ended;
      continue;
    }
    if (pid < 0 && errno != EINTR) {  // ECHILD included: what is left can no longer be reaped
      out.lost_errno = errno;
      kill_all(SIGKILL);
      break;
    }
    const auto now = Clock::now();
    if (!killed && rule.stop && rule.stop->load()) {
      out.interrupted = true;
      kill_at = now, cause = KillCause::stop;
    }
    if (!killed && now >= kill_at) {
      if (cause == KillCause::deadline) out.timed_out = true;
      if (on_kill) on_kill(cause, pids);
      kill_all(rule.groups ? SIGTERM : SIGKILL);
      killed = true;
      if (rule.groups) force_at = now + std::chrono::seconds(1);
    }
    if (now >= force_at) {
      kill_all(SIGKILL);
      force_at = Clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return out;
}

LaunchOutcome run_ranks(const std::vector<RankLaunch>& ranks, std::chrono::milliseconds timeout,
                        std::chrono::milliseconds grace, const std::atomic<bool>* stop) {
  LaunchOutcome out;
  out.exit_codes.assign(ranks.size(), -1);
  const auto start = Clock::now();
  std::vector<pid_t> pids(ranks.size(), 0), groups;
  auto kill_all = [&](int sig) {
    for (pid_t p : pids) signal_group(p, sig);
  };

  for (size_t r = 0; r < ranks.size(); ++r) {
    pid_t pid = 0;
    try {
      pid = start_process(ranks[r]);
    } catch (...) {
      kill_all(SIGKILL);
      throw;
    }
    pids[r] = pid;
    groups.push_back(pid);
  }

  ReapRule rule;
  rule.grace = grace;
  rule.deadline = start + timeout;
  rule.stop = stop;
  rule.groups = true;
  const Reaped reaped = reap_processes(pids, rule);
  out.exit_codes = reaped.exit_codes;
  out.timed_out = reaped.timed_out;
  out.interrupted = reaped.interrupted;
  for (pid_t g : groups) signal_group(g, SIGKILL);  // what a rank left behind (mpirun's daemons)
  out.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

std::string error_lines(const std::string& path, size_t max_lines) {
  std::ifstream in(path);
  std::vector<std::string> all, errors;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    all.push_back(line);
    if (line.find("error") != std::string::npos || line.find("Error") != std::string::npos ||
        line.find("ERROR") != std::string::npos)
      errors.push_back(line);
  }
  const auto& pick = errors.empty() ? all : errors;
  std::string s;
  for (size_t i = pick.size() > max_lines ? pick.size() - max_lines : 0; i < pick.size(); ++i)
    s += (s.empty() ? "" : " | ") + pick[i];
  return s;
}

}  // namespace ringbench
