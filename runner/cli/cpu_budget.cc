#include "runner/cli/cpu_budget.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

namespace ringbench {
namespace {

struct CpuTimes {
  unsigned long long busy = 0, total = 0;
};

// Per-CPU jiffies from /proc/stat: busy = everything but idle and iowait.
std::map<int, CpuTimes> read_proc_stat() {
  std::map<int, CpuTimes> out;
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || !std::isdigit(static_cast<unsigned char>(line[3])))
      continue;
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    unsigned long long v[8] = {};
    fields >> cpu;
    for (auto& x : v) fields >> x;
    if (!fields && !fields.eof()) continue;
    CpuTimes t;
    for (int i = 0; i < 8; ++i) t.total += v[i];
    t.busy = t.total - v[3] - v[4];
    out[cpu] = t;
  }
  return out;
}

// The tightest cpu.max quota (cgroup v2) on the path from this process's cgroup to the root.
double cgroup_quota_cpus() {
  std::ifstream self("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(self, line))
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  double best = 0;
  for (std::string p = path; !p.empty();) {
    std::ifstream max("/sys/fs/cgroup" + p + "/cpu.max");
    std::string quota;
    double period = 0;
    char* end = nullptr;
    if (max >> quota >> period && quota != "max" && period > 0) {
      const double cpus = std::strtod(quota.c_str(), &end) / period;
      if (cpus > 0 && (best == 0 || cpus < best)) best = cpus;
    }
    if (p == "/") break;
    const size_t slash = p.find_last_of('/');
    p = slash == 0 ? "/" : p.substr(0, slash);
  }
  return best;
}

}  // namespace

CpuBudget decide_cpu_budget(int allowed, double quota, int busy, int ranks_here) {
  CpuBudget b;
  b.allowed = std::max(1, allowed);
  b.quota = quota > 0 ? quota : 0;
  b.busy = std::clamp(busy, 0, b.allowed);
  b.ranks_here = std::max(1, ranks_here);
  int usable = b.allowed;
  if (b.quota > 0) usable = std::min(usable, std::max(1, static_cast<int>(std::ceil(b.quota))));
  b.threads = std::max(1, (usable - std::min(b.busy, usable)) / b.ranks_here);
  // Not when every CPU is busy: a second thread then only adds one more to share them (measured
  // slower for lenet's small layers, even for MobileNet).
  b.weight_grad_thread = b.threads < std::max(1, usable / b.ranks_here) && b.busy < usable;
  return b;
}

CpuBudget measure_cpu_budget(int ranks_here, int sample_ms) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const bool have_mask = sched_getaffinity(0, sizeof set, &set) == 0;
  const int allowed = have_mask ? CPU_COUNT(&set)
                                : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> busy_cpus, free_cpus;
  const auto before = read_proc_stat();
  std::this_thread::sleep_for(std::chrono::milliseconds(sample_ms));
  const auto after = read_proc_stat();
  for (const auto& [cpu, t1] : after) {
    if (have_mask && (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &set))) continue;
    const auto it = before.find(cpu);
    if (it == before.end() || t1.total <= it->second.total || t1.busy < it->second.busy) continue;
    const bool busy = double(t1.busy - it->second.busy) >= 0.5 * double(t1.total - it->second.total);
    (busy ? busy_cpus : free_cpus).push_back(cpu);
  }
  CpuBudget b = decide_cpu_budget(allowed, cgroup_quota_cpus(), int(busy_cpus.size()), ranks_here);
  b.busy_cpus = std::move(busy_cpus);
  b.free_cpus = std::move(free_cpus);
  return b;
}

std::string CpuBudget::describe() const {
  std::ostringstream s;
  s << threads << " (auto: " << allowed << " CPU" << (allowed == 1 ? "" : "s");
  if (quota > 0) s << ", cgroup quota " << quota;
  s << ", " << busy << " busy with other work, " << ranks_here << " rank" << (ranks_here == 1 ? "" : "s")
    << " here; --threads N to choose)";
  return s.str();
}

nlohmann::json CpuBudget::to_json() const {
  return {{"allowed_cpus", allowed}, {"cgroup_quota_cpus", quota}, {"busy_cpus", busy},
          {"ranks_here", ranks_here}, {"threads", threads}, {"weight_grad_thread", weight_grad_thread},
          {"busy_cpu_list", busy_cpus}, {"free_cpu_list", free_cpus}};
}

}  // namespace ringbench
