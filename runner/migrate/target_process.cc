#include "runner/migrate/target_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

#include "base/errors.h"
#include "collectives/net.h"
#include "runner/job/metadata.h"

extern char** environ;

namespace ringbench::migrate {
namespace {

// The first IPv4 address of this (thread's) network namespace that is not loopback, or "".
std::string first_ipv4() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string ip;
  for (ifaddrs* it = list; it && ip.empty(); it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, buf, sizeof buf);
    if (std::strncmp(buf, "127.", 4) != 0) ip = buf;
  }
  ::freeifaddrs(list);
  return ip;
}

// The listening socket, made on a thread that joined `ns_fd` (so it lives in that namespace).
int listen_in(int ns_fd, const std::string& local_addr, std::string* host, int* port) {
  int fd = -1;
  std::string error;
  std::thread([&] {
    try {
      if (ns_fd >= 0) check_errno(::setns(ns_fd, CLONE_NEWNET) == 0, "setns into the target node's namespace");
      *host = ns_fd >= 0 ? first_ipv4() : local_addr;
      if (host->empty()) throw Error("the target node's namespace has no IPv4 address");
      fd = net::listen_tcp(*host, 0, port);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }).join();
  if (fd < 0) throw Error("cannot listen for the migration on node B: " + error);
  return fd;
}

// One past the highest CPU number this kernel may ever use (/sys/devices/system/cpu/possible,
// e.g. "0-63"): CPU numbers can have gaps, so the count of CPUs is not the bound.
int machine_cpus() {
  long n = ::sysconf(_SC_NPROCESSORS_CONF);
  const std::string text = read_first_line("/sys/devices/system/cpu/possible");
  const size_t last = text.find_last_of(",-");
  try {
    n = std::max(n, std::stol(text.substr(last == std::string::npos ? 0 : last + 1)) + 1);
  } catch (const std::exception&) {  // unreadable: the count of CPUs
  }
  return int(std::clamp(n, 1L, long(CPU_SETSIZE)));
}

int parse_cpu(const std::string& s, const std::string& option, const std::string& text) {
  const int n = machine_cpus();
  size_t used = 0;
  int cpu = -1;
  try {
    cpu = std::stoi(s, &used);
  } catch (const std::exception&) {
  }
  if (s.empty() || used != s.size() || cpu < 0)
    throw Error(option + " " + text + ": '" + s + "' is not a CPU number (use e.g. 2,3 or 2-3)");
  if (cpu >= n) throw Error(option + " " + text + ": CPU " + s + " does not exist (this machine has CPUs 0-" +
                            std::to_string(n - 1) + ")");
  return cpu;
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text, const std::string& option) {
  std::set<int> cpus;
  size_t begin = 0;
  while (!text.empty() && begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, comma - begin);
    const size_t dash = item.find('-');
    const int first = parse_cpu(item.substr(0, dash), option, text);
    const int last = dash == std::string::npos ? first : parse_cpu(item.substr(dash + 1), option, text);
    if (last < first) throw Error(option + " " + text + ": the range " + item + " is empty");
    for (int c = first; c <= last; ++c) cpus.insert(c);
    begin = comma + 1;
  }
  return {cpus.begin(), cpus.end()};
}

// The kernel checks an affinity against the cgroup's cpuset only when it is set. A thread of
// our own sets it on itself (the target, a child, shares this process's cgroup), so that a list
// it could not take is an error at startup, not a target that dies inside the stun.
void check_cpus_allowed(const std::vector<int>& cpus, const std::string& option) {
  if (cpus.empty()) return;
  cpu_set_t want, got;
  CPU_ZERO(&want);
  CPU_ZERO(&got);
  for (int c : cpus) CPU_SET(c, &want);
  int err = 0;
  std::thread([&] {
    if (::sched_setaffinity(0, sizeof want, &want) != 0 || ::sched_getaffinity(0, sizeof got, &got) != 0) err = errno;
  }).join();
  std::string refused, kept;
  for (int c : cpus) {
    std::string& list = !err && CPU_ISSET(c, &got) ? kept : refused;
    list += (list.empty() ? "" : ",") + std::to_string(c);
  }
  if (refused.empty()) return;
  throw Error(option + ": this process may not run on CPU " + refused + " (outside its cgroup's cpuset" +
              (err ? std::string("; sched_setaffinity: ") + std::strerror(err) : "; of the list it may use " + kept) +
              ")");
}

std::vector<int> affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::vector<int> checked_cpu_list(const nlohmann::json& v, const std::string& key) {
  std::set<int> seen;
  if (!v.is_array() || v.size() > size_t(CPU_SETSIZE)) throw Error("store key " + key + ": cpus is not a CPU list");
  for (const auto& c : v) {
    if (!c.is_number_integer() || c.get<int64_t>() < 0 || c.get<int64_t>() >= machine_cpus() ||
        !seen.insert(c.get<int>()).second)
      throw Error("store key " + key + ": cpus holds " + c.dump() + ", not a distinct CPU of this machine");
  }
  return {seen.begin(), seen.end()};
}

TargetProcess spawn_target(const std::string& netns, const std::vector<int>& cpus, const std::string& local_addr,
                           const std::vector<std::string>& argv) {
  int ns_fd = -1;
  if (!netns.empty()) {
    ns_fd = ::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns_fd < 0) throw Error("--migrate-netns " + netns + ": no such network namespace (/run/netns/" + netns + "): " +
                               std::strerror(errno));
  }
  TargetProcess t;
  int listen_fd = -1;
  try {
    listen_fd = listen_in(ns_fd, local_addr, &t.host, &t.port);
  } catch (...) {
    if (ns_fd >= 0) ::close(ns_fd);
    throw;
  }
  // Everything the child needs, made before fork: after it only async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, kTargetFdVar, std::strlen(kTargetFdVar)) != 0) env_strings.emplace_back(*e);
  env_strings.push_back(std::string(kTargetFdVar) + "=" + std::to_string(listen_fd));
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  cpu_set_t cpu_set;
  CPU_ZERO(&cpu_set);
  for (int c : cpus) CPU_SET(c, &cpu_set);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the source's process holds the rank's place
    if (::getppid() != parent) _exit(127);
    if (ns_fd >= 0 && ::setns(ns_fd, CLONE_NEWNET) != 0) _exit(126);
    if (!cpus.empty() && ::sched_setaffinity(0, sizeof cpu_set, &cpu_set) != 0) {
      static const char msg[] = "ringbench: the migration target cannot run on --migrate-cpus (sched_setaffinity failed)\n";
      [[maybe_unused]] const ssize_t n = ::write(2, msg, sizeof msg - 1);  // async-signal-safe, unlike printf
      _exit(125);
    }
    ::fcntl(listen_fd, F_SETFD, 0);  // inherited across exec
    ::execve("/proc/self/exe", args.data(), envp.data());
    _exit(127);
  }
  const int fork_errno = errno;
  ::close(listen_fd);
  if (ns_fd >= 0) ::close(ns_fd);
  if (pid < 0) throw Error(std::string("cannot start the migration target: fork: ") + std::strerror(fork_errno));
  t.pid = pid;
  return t;
}

int target_listen_fd() {
  const char* v = std::getenv(kTargetFdVar);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long fd = std::strtol(v, &end, 10);
  if (*end || fd < 3 || fd > 65535 || ::fcntl(int(fd), F_GETFD) < 0)
    throw Error(std::string(kTargetFdVar) + "=" + v + " is not an open socket of this process");
  ::fcntl(int(fd), F_SETFD, FD_CLOEXEC);
  return int(fd);
}

int wait_target(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void kill_target(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  wait_target(pid);
}

}  // namespace ringbench::migrate
