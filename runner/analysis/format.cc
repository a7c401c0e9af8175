// Medians, fixed decimals, sizes, "x ± ci" and markdown tables.
#include "runner/analysis/format.h"

#include <algorithm>
#include <cstdio>

namespace ringbench::report {
namespace {

std::string md_cell(std::string s) {
  std::string out;
  for (char c : one_line(std::move(s))) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

std::string fixed(const std::optional<double>& v, int decimals) {
  return v ? fixed(*v, decimals) : "";
}

std::string percent(double fraction) { return fixed(100 * fraction, 0) + "%"; }

std::string fmt_bytes(uint64_t b) {
  const char* units[] = {"G", "M", "K"};
  for (int i = 0; i < 3; ++i) {
    const uint64_t u = uint64_t(1) << (10 * (3 - i));
    if (b >= u && b % u == 0) return std::to_string(b / u) + units[i];
  }
  return std::to_string(b) + "B";
}

std::string with_ci(const MeanCi& m, int decimals, const std::string& unit) {
  std::string s = fixed(m.mean, decimals) + unit;
  return m.n >= 2 ? s + " ± " + fixed(m.ci95, decimals) : s;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

std::string mib(double v) { return fixed(v, v == std::floor(v) ? 0 : 1); }

std::string num6(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string md_table(const std::vector<std::string>& head, const std::string& align,
                     const std::vector<std::vector<std::string>>& rows) {
  std::string t = "|", rule = "|";
  for (size_t i = 0; i < head.size(); ++i) {
    t += ' ';  // appended: GCC 12's -Wrestrict misfires on " " + std::string
    t += md_cell(head[i]);
    t += " |";
    rule += align[i] == 'r' ? "---:|" : "---|";
  }
  t += "\n" + rule + "\n";
  for (const auto& row : rows) {
    t += "|";
    for (const auto& c : row) {
      t += ' ';
      t += md_cell(c);
      t += " |";
    }
    t += "\n";
  }
  return t + "\n";
}

std::string image(const std::string& alt, const std::string& name) {
  return "![" + alt + "](plots/" + name + ".svg)\n\n";
}

}  // namespace ringbench::report
