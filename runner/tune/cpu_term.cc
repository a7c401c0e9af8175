#include "runner/tune/cpu_term.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "runner/analysis/format.h"
#include "runner/analysis/stats.h"
#include "runner/analysis/run.h"

namespace ringbench::tune {

nlohmann::json CpuTerm::to_json() const {
  return {{"cpu_s_per_byte", cpu_s_per_byte}, {"cpu_ns_per_byte", cpu_s_per_byte * 1e9},
          {"fitted_sizes", fitted_sizes},     {"min_bytes", min_bytes},
          {"max_bytes", max_bytes},           {"cores_per_node", cores},
          {"compute_threads_per_node", compute_threads}, {"comm_threads_per_node", comm_threads},
          {"competes", competes()}};
}

double fit_cpu_per_byte(const std::vector<std::pair<double, double>>& samples, int* used) {
  std::vector<std::pair<double, double>> big;
  for (const auto& s : samples)
    if (s.first >= double(1 << 20)) big.push_back(s);
  if (used) *used = int(big.size());
  if (big.empty()) return 0;
  if (const auto line = fit_line(big)) return std::max(0.0, line->slope);
  double x = 0, y = 0;  // one size: the line through the origin
  for (const auto& s : big) x += s.first, y += s.second;
  return std::max(0.0, y / x);
}

std::vector<std::pair<double, double>> cpu_samples(const report::Run& probe, const std::string& transport, int nodes) {
  std::map<uint64_t, std::vector<double>> by_size;
  for (const report::Point* p : report::points_of(probe, PointKind::collectives)) {
    if (!report::is_allreduce_point(*p) || p->transport != transport || report::ranks_of(probe, *p) != nodes) continue;
    for (const auto& [bytes, s] : p->sizes)
      if (s.algos.size() == 1 && *s.algos.begin() == "ring")
        by_size[bytes].insert(by_size[bytes].end(), s.cpu_us.begin(), s.cpu_us.end());
  }
  std::vector<std::pair<double, double>> out;
  for (const auto& [bytes, cpu] : by_size)
    if (!cpu.empty()) out.push_back({double(bytes), report::median(cpu) * 1e-6});
  return out;
}

int comm_threads_per_rank(const std::string& transport) { return transport == "tcp" || transport == "verbs" ? 2 : 1; }

CpuTerm fit_cpu_term(const std::vector<std::pair<double, double>>& samples, int cores, int compute_threads,
                     int comm_threads) {
  CpuTerm t;
  t.cpu_s_per_byte = fit_cpu_per_byte(samples, &t.fitted_sizes);
  for (const auto& [bytes, cpu] : samples)
    if (bytes >= double(1 << 20)) {
      t.min_bytes = t.min_bytes == 0 ? bytes : std::min(t.min_bytes, bytes);
      t.max_bytes = std::max(t.max_bytes, bytes);
    }
  t.cores = cores;
  t.compute_threads = compute_threads;
  t.comm_threads = comm_threads;
  return t;
}

void set_busiest_node(CpuTerm& t, const std::vector<RankCpus>& ranks, int comm_threads_per_rank) {
  int best_over = std::numeric_limits<int>::min();
  for (size_t r = 0; r < ranks.size(); ++r) {
    // The ranks on r's host whose CPUs overlap r's, and every CPU any of them may run on.
    std::set<int> cores(ranks[r].cpus.begin(), ranks[r].cpus.end());
    int compute = 0, sharing = 0;
    for (const auto& o : ranks) {
      if (o.host != ranks[r].host) continue;
      const bool overlaps = std::any_of(o.cpus.begin(), o.cpus.end(), [&](int c) {
        return std::find(ranks[r].cpus.begin(), ranks[r].cpus.end(), c) != ranks[r].cpus.end();
      });
      if (!overlaps) continue;
      cores.insert(o.cpus.begin(), o.cpus.end());
      compute += o.compute_threads;
      ++sharing;
    }
    const int comm = sharing * comm_threads_per_rank, over = compute + comm - int(cores.size());
    if (over > best_over) best_over = over, t.cores = int(cores.size()), t.compute_threads = compute, t.comm_threads = comm;
  }
}

CpuTerm cpu_term(const report::Run& probe, const std::string& transport, int nodes, int cores_per_node,
                 int ranks_per_node) {
  // A sweep's train rank runs --threads cpus_per_node.
  return fit_cpu_term(cpu_samples(probe, transport, nodes), cores_per_node, ranks_per_node * cores_per_node,
                      ranks_per_node * comm_threads_per_rank(transport));
}

std::string describe(const CpuTerm& t) {
  char buf[400];
  if (t.fitted_sizes == 0) return "CPU term: not measured (the probe's rows carry no CPU time): not charged";
  std::snprintf(buf, sizeof buf,
                "CPU term: %.3f ns of a rank's CPU per byte on the wire (probe, %d sizes %.0fM-%.0fM); %d compute + %d "
                "communication threads on %d cores per node: %s",
                t.cpu_s_per_byte * 1e9, t.fitted_sizes, t.min_bytes / (1 << 20), t.max_bytes / (1 << 20),
                t.compute_threads, t.comm_threads, t.cores,
                t.competes() ? "they compete, charged to the step" : "a core to spare, not charged");
  return buf;
}

}  // namespace ringbench::tune
