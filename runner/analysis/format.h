// The report's numbers and text: medians, fixed decimals, sizes, "x ± ci", markdown tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runner/analysis/stats.h"

namespace ringbench::report {

double median(std::vector<double> v);

// Fixed decimals; never "-0.00".
std::string fixed(double v, int decimals);
std::string fixed(const std::optional<double>& v, int decimals);

std::string percent(double fraction);

// "4K", "1M", "64M" (binary units, as the -b/-e options take them).
std::string fmt_bytes(uint64_t b);

// "x ± ci" with a CI only where there are two samples or more.
std::string with_ci(const MeanCi& m, int decimals, const std::string& unit = "");

std::string one_line(std::string s);

// MiB without decimals where whole ("4096"), else with one ("12.5").
std::string mib(double v);

// "%.6g": gnuplot's data and a slice's milliseconds.
std::string num6(double v);

// A markdown table; `align`: one 'l' or 'r' per column.
std::string md_table(const std::vector<std::string>& head, const std::string& align,
                     const std::vector<std::vector<std::string>>& rows);

// A markdown image of plots/NAME.svg.
std::string image(const std::string& alt, const std::string& name);

}  // namespace ringbench::report
