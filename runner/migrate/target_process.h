// The migration's target: a new process of this executable, with the rank's command line, on
// node B (inside that node's network namespace on an emulated cluster, or on this host). Its
// listening socket is made here, in B's namespace, and handed to it: so its address is known
// before it starts, and it listens only on B's address.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringbench::migrate {

// The variable that tells a process it is a migration target, and the fd it listens on.
inline constexpr const char* kTargetFdVar = "RINGBENCH_MIGRATION_FD";

struct TargetProcess {
  pid_t pid = -1;
  std::string host;  // where it listens
  int port = 0;
};

// Starts the target with `argv` (argv[0] ignored: this executable) in network namespace
// `netns` (a name under /run/netns; "" = this process's), on `cpus` (empty: this process's),
// listening on that namespace's first non-loopback IPv4 address (on this host: `local_addr`).
// It dies with this process.
TargetProcess spawn_target(const std::string& netns, const std::vector<int>& cpus, const std::string& local_addr,
                           const std::vector<std::string>& argv);
// A CPU list as taskset takes it ("0,2-3"; "" gives none), each CPU one this machine has;
// errors name `option`.
std::vector<int> parse_cpu_list(const std::string& text, const std::string& option);
// Throws, naming `option`, when the kernel would not run a process of this cgroup on every CPU
// of `cpus` (CPUs outside its cpuset).
void check_cpus_allowed(const std::vector<int>& cpus, const std::string& option);
// The CPUs this process may run on.
std::vector<int> affinity();
// A CPU list read from the store (`key`): an array of distinct CPU numbers this machine has.
std::vector<int> checked_cpu_list(const nlohmann::json& v, const std::string& key);
// The listening socket a target was handed (-1 when this process is not a target).
int target_listen_fd();
// Waits for the target to end; its exit code (128 + signal when killed).
int wait_target(pid_t pid);
void kill_target(pid_t pid);

}  // namespace ringbench::migrate
