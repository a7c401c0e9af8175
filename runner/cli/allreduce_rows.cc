#include "runner/cli/allreduce_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/errors.h"

namespace ringbench {

// Layout: wrong (u64), cpu_us (double), then one double per timed iteration.
constexpr size_t kHeader = sizeof(uint64_t) + sizeof(double);

std::string pack(const Measured& m) {
  std::string s(kHeader + m.us.size() * sizeof(double), '\0');
  std::memcpy(s.data(), &m.wrong, sizeof m.wrong);
  std::memcpy(s.data() + sizeof m.wrong, &m.cpu_us, sizeof m.cpu_us);
  if (!m.us.empty()) std::memcpy(s.data() + kHeader, m.us.data(), m.us.size() * sizeof(double));
  return s;
}

Measured unpack(const std::string& s, const std::string& key, int sender, int iters, size_t count) {
  Measured m;
  const size_t want = kHeader + size_t(iters) * sizeof(double);
  const std::string from = "store key " + key + " (from rank " + std::to_string(sender) + "): ";
  if (s.size() != want)
    throw Error(from + "expected " + std::to_string(want) + " bytes (" + std::to_string(iters) +
                " timings), got " + std::to_string(s.size()));
  std::memcpy(&m.wrong, s.data(), sizeof m.wrong);
  std::memcpy(&m.cpu_us, s.data() + sizeof m.wrong, sizeof m.cpu_us);
  if (m.wrong > count)
    throw Error(from + std::to_string(m.wrong) + " wrong elements of " + std::to_string(count));
  m.us.resize(size_t(iters));
  if (iters > 0) std::memcpy(m.us.data(), s.data() + kHeader, m.us.size() * sizeof(double));
  for (double us : m.us)
    if (!(us >= 0 && us < 1e12)) throw Error(from + "timing " + std::to_string(us) + " us is not a duration");
  if (!(m.cpu_us >= 0 && m.cpu_us < 1e12))
    throw Error(from + "CPU time " + std::to_string(m.cpu_us) + " us is not a duration");
  return m;
}

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double idx = p / 100.0 * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(idx)), hi = static_cast<size_t>(std::ceil(idx));
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

}  // namespace

Row summarize(const std::vector<Measured>& ranks, size_t bytes, double busbw_factor) {
  Row row{};
  std::vector<double> slowest(ranks[0].us.size(), 0);
  for (auto& m : ranks) {
    if (m.us.size() != slowest.size()) throw Error("the ranks measured different numbers of iterations");
    row.wrong += m.wrong;
    double sum = 0;
    for (size_t i = 0; i < m.us.size(); ++i) {
      sum += m.us[i];
      slowest[i] = std::max(slowest[i], m.us[i]);
    }
    if (!m.us.empty()) row.time_us = std::max(row.time_us, sum / static_cast<double>(m.us.size()));
    row.cpu_us += m.cpu_us / static_cast<double>(ranks.size());
  }
  row.p50_us = percentile(slowest, 50);
  row.p99_us = percentile(slowest, 99);
  row.algbw = row.time_us > 0 ? static_cast<double>(bytes) / row.time_us / 1e3 : 0;  // GB/s
  row.busbw = row.algbw * busbw_factor;
  return row;
}

}  // namespace ringbench
