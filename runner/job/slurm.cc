#include "runner/job/slurm.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/errors.h"

extern char** environ;

namespace ringbench {
namespace {

std::string get(const std::map<std::string, std::string>& env, const std::string& k) {
  const auto it = env.find(k);
  return it == env.end() ? "" : it->second;
}

// A non-negative decimal number, or an Error naming the variable.
long number(const std::map<std::string, std::string>& env, const std::string& k) {
  const std::string v = get(env, k);
  if (v.empty() || v.size() > 12 || v.find_first_not_of("0123456789") != std::string::npos)
    throw Error(k + "='" + v.substr(0, 40) + "' is not a number (ringbench reads its rank from Slurm's variables)");
  return std::stol(v);
}

std::map<std::string, std::string> environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace

bool launched_by_slurm() { return std::getenv("SLURM_PROCID") && std::getenv("SLURM_STEP_NUM_TASKS"); }

std::string slurm_first_host(const std::string& hostlist) {
  const size_t bracket = hostlist.find('['), comma = hostlist.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket))
    return hostlist.substr(0, comma);
  // prefix[first-...,...]: the first number of the range, its zero padding kept.
  const size_t end = hostlist.find_first_of("-,]", bracket + 1);
  if (end == std::string::npos) throw Error("SLURM_STEP_NODELIST '" + hostlist.substr(0, 40) + "' is not a hostlist");
  return hostlist.substr(0, bracket) + hostlist.substr(bracket + 1, end - bracket - 1);
}

int slurm_store_port(long job_id, long step_id) {
  if (const char* p = std::getenv("RINGBENCH_SLURM_PORT")) {
    const int port = std::atoi(p);
    if (port < 1024 || port > 65535) throw Error("RINGBENCH_SLURM_PORT=" + std::string(p).substr(0, 12) + " is not a port in 1024..65535");
    return port;
  }
  return int(20000 + (job_id * 64 + step_id) % 20000);
}

std::map<std::string, std::string> slurm_rank_env(const std::map<std::string, std::string>& env) {
  const long rank = number(env, "SLURM_PROCID"), size = number(env, "SLURM_STEP_NUM_TASKS");
  if (size < 1 || rank >= size)
    throw Error("SLURM_PROCID=" + std::to_string(rank) + " is not below SLURM_STEP_NUM_TASKS=" + std::to_string(size));
  const long job = number(env, "SLURM_JOB_ID");
  // A batch step has no step number: it is not an srun step of ranks.
  const long step = get(env, "SLURM_STEP_ID").empty() ? 0 : number(env, "SLURM_STEP_ID");
  const bool one_node = get(env, "SLURM_STEP_NUM_NODES") == "1";
  const std::string host = one_node ? "127.0.0.1" : slurm_first_host(get(env, "SLURM_STEP_NODELIST"));
  if (host.empty()) throw Error("SLURM_STEP_NODELIST is empty: no node to serve the job's store on");
  std::map<std::string, std::string> out = {
      {"RINGBENCH_RANK", std::to_string(rank)},
      {"RINGBENCH_WORLD_SIZE", std::to_string(size)},
      {"RINGBENCH_STORE", host + ":" + std::to_string(slurm_store_port(job, step))},
      {"RINGBENCH_JOB_ID", "slurm-" + std::to_string(job) + "." + std::to_string(step)},
      {"RINGBENCH_LAUNCHER", "slurm"}};
  if (rank == 0) out["RINGBENCH_STORE_SERVE"] = "1";
  for (auto it = out.begin(); it != out.end();)
    it = env.count(it->first) ? out.erase(it) : std::next(it);
  return out;
}

SlurmRankEnv::SlurmRankEnv() {
  for (const auto& [k, v] : slurm_rank_env(environment())) {
    setenv(k.c_str(), v.c_str(), 1);
    set_.push_back(k);
  }
}

SlurmRankEnv::~SlurmRankEnv() {
  for (const std::string& k : set_) unsetenv(k.c_str());
}

int slurm_tasks_on_this_node() {
  const char* spec = std::getenv("SLURM_STEP_TASKS_PER_NODE");
  const char* node = std::getenv("SLURM_NODEID");
  if (!spec || !node) return 1;
  // "2(x3),1": 2 tasks on each of nodes 0-2, then 1 on node 3.
  long want = std::atol(node), at = 0;
  for (const char* p = spec; *p;) {
    char* end = nullptr;
    const long tasks = std::strtol(p, &end, 10);
    long repeat = 1;
    if (end == p) return 1;
    if (*end == '(' && end[1] == 'x') repeat = std::strtol(end + 2, &end, 10), end += (*end == ')');
    if (want < at + repeat) return int(std::max(1L, tasks));
    at += repeat;
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end) return 1;
  }
  return 1;
}

}  // namespace ringbench
