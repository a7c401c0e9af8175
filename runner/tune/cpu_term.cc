#include "runner/tune/cpu_term.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "runner/analysis/format.h"
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
  if (big.size() == 1) return std::max(0.0, big[0].second / big[0].first);
  double mx = 0, my = 0;
  for (const auto& [x, y] : big) mx += x / double(big.size()), my += y / double(big.size());
  double sxy = 0, sxx = 0;
  for (const auto& [x, y] : big) sxy += (x - mx) * (y - my), sxx += (x - mx) * (x - mx);
  return sxx > 0 ? std::max(0.0, sxy / sxx) : std::max(0.0, my / mx);
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

CpuTerm cpu_term(const report::Run& probe, const std::string& transport, int nodes, int cores_per_node,
                 int ranks_per_node) {
  CpuTerm t;
  const auto samples = cpu_samples(probe, transport, nodes);
  t.cpu_s_per_byte = fit_cpu_per_byte(samples, &t.fitted_sizes);
  for (const auto& [bytes, cpu] : samples)
    if (bytes >= double(1 << 20)) {
      t.min_bytes = t.min_bytes == 0 ? bytes : std::min(t.min_bytes, bytes);
      t.max_bytes = std::max(t.max_bytes, bytes);
    }
  t.cores = cores_per_node;
  t.compute_threads = ranks_per_node * cores_per_node;  // a sweep's train rank: --threads cpus_per_node
  t.comm_threads = ranks_per_node * comm_threads_per_rank(transport);
  return t;
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
