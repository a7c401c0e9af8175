#include "runner/record/algo_table.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "base/errors.h"
#include "base/input_file.h"

namespace ringbench {
namespace {

using nlohmann::json;

const std::vector<std::string> kAlgos{"ring", "direct", "rd", "hd"};
const std::vector<std::string> kBases{"measured", "nearest measured"};
constexpr size_t kMaxEntries = 4096, kMaxRanges = 4096;

// One JSON value and where it sits in the file, for errors: "t.json: entries[0].nodes: ...".
struct Value {
  const json& j;
  std::string path;
  const std::string& file;

  [[noreturn]] void fail(const std::string& why) const { throw Error(file + ": " + (path.empty() ? "" : path + ": ") + why); }
  Value at(const std::string& key) const {
    if (!j.contains(key)) Value{j, path.empty() ? key : path + "." + key, file}.fail("missing");
    return {j.at(key), path.empty() ? key : path + "." + key, file};
  }
  Value at(size_t i) const { return {j.at(i), path + "[" + std::to_string(i) + "]", file}; }
  void object_of(std::initializer_list<const char*> keys) const {
    if (!j.is_object()) fail("must be an object");
    for (const auto& item : j.items()) {
      const std::string& k = item.key();  // not a structured binding: clang 14 cannot capture one
      if (std::none_of(keys.begin(), keys.end(), [&](const char* x) { return k == x; }))
        fail("unknown key " + quote_excerpt(k));
    }
  }
  size_t array(size_t max) const {
    if (!j.is_array() || j.empty()) fail("must be a non-empty list");
    if (j.size() > max) fail("more than " + std::to_string(max) + " items");
    return j.size();
  }
  std::string text(size_t max_chars) const {
    if (!j.is_string()) fail("must be a string");
    const auto s = j.get<std::string>();
    if (s.size() > max_chars) fail("longer than " + std::to_string(max_chars) + " characters");
    return s;
  }
  std::string one_of(const std::vector<std::string>& names) const {
    const std::string s = text(64);
    if (std::find(names.begin(), names.end(), s) == names.end()) fail(quote_excerpt(s) + " is not one of: " + join(names));
    return s;
  }
  double number(double lo, double hi) const {
    if (!j.is_number()) fail("must be a number");
    const double x = j.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) fail("must be a number from " + fmt(lo) + " to " + fmt(hi));
    return x;
  }
  size_t bytes() const {
    if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<int64_t>() >= 0))
      fail("must be a byte count (a whole number >= 0)");
    return j.get<size_t>();
  }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  }
  static std::string fmt(double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", x);
    return b;
  }
};

// "1000 B", "64 KiB", "8.5 MiB", "39.18 KiB" (4 digits where the unit does not divide it).
std::string size_text(size_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (u < 6 && b >= (size_t{1024} << (10 * u))) ++u;
  char out[32];
  const double x = double(b) / double(size_t{1} << (10 * u));
  std::snprintf(out, sizeof out, "%.4g %s", x, units[u]);
  return out;
}

bool power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

AlgoTableFit read_fit(const Value& v, int nodes) {
  v.object_of({"algo", "alpha_s", "beta_s_per_byte", "min_bytes", "max_bytes", "r2"});
  AlgoTableFit f;
  f.algo = v.at("algo").one_of(kAlgos);
  if (f.algo == "rd" && !power_of_two(nodes)) v.at("algo").fail("rd needs a power-of-two N, not " + std::to_string(nodes));
  f.alpha_s = v.at("alpha_s").number(0, 1e6);
  f.beta_s_per_byte = v.at("beta_s_per_byte").number(0, 1e6);
  f.min_bytes = v.at("min_bytes").number(1, 1e18);
  f.max_bytes = v.at("max_bytes").number(f.min_bytes, 1e18);
  f.r2 = v.at("r2").number(-1e18, 1);
  return f;
}

std::pair<double, std::optional<double>> read_times(const Value& v, bool last) {
  if (!v.j.is_array() || v.j.size() != 2) v.fail("must be [time at from_bytes, time at to_bytes]");
  std::pair<double, std::optional<double>> t{v.at(size_t{0}).number(0, 1e9), std::nullopt};
  if (last != v.j.at(1).is_null()) v.at(1).fail(last ? "must be null in the open-ended range" : "must be a number");
  if (!last) t.second = v.at(1).number(0, 1e9);
  return t;
}

AlgoTableRange read_range(const Value& v, const std::set<std::string>& fitted, size_t from, bool last) {
  v.object_of({"from_bytes", "to_bytes", "algo", "basis", "predicted_s"});
  AlgoTableRange r;
  r.from_bytes = v.at("from_bytes").bytes();
  if (r.from_bytes != from) v.at("from_bytes").fail("must be " + std::to_string(from) + " (one byte above the range before)");
  const Value to = v.at("to_bytes");
  if (last != to.j.is_null()) to.fail(last ? "must be null: the last range is open-ended" : "must be a byte count (only the last range is open)");
  if (!last) {
    r.to_bytes = to.bytes();
    if (*r.to_bytes < r.from_bytes || *r.to_bytes == SIZE_MAX) to.fail("must be from from_bytes to " + std::to_string(SIZE_MAX - 1));
  }
  r.algo = v.at("algo").one_of(kAlgos);
  if (!fitted.count(r.algo)) v.at("algo").fail(r.algo + " has no fit at this N: only a measured algorithm can be chosen");
  r.basis = v.at("basis").one_of(kBases);
  const Value p = v.at("predicted_s");
  p.object_of({"ring", "direct", "rd", "hd"});
  for (const auto& [k, t] : p.j.items()) {
    if (!fitted.count(k)) p.fail(k + " has no fit at this N");
    r.predicted_s[k] = read_times(p.at(k), last);
  }
  if (!r.predicted_s.count(r.algo)) p.fail("has no time for the chosen " + r.algo);
  return r;
}

AlgoTableEntry read_entry(const Value& v) {
  v.object_of({"transport", "nodes", "fits", "ranges"});
  AlgoTableEntry e;
  e.transport = v.at("transport").text(32);
  if (e.transport.empty() || !std::all_of(e.transport.begin(), e.transport.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
      }))
    v.at("transport").fail(quote_excerpt(e.transport) + " is not a transport name");
  e.nodes = int(v.at("nodes").number(2, 1 << 20));
  if (v.at("nodes").j.get<double>() != e.nodes) v.at("nodes").fail("must be a whole number");
  std::set<std::string> fitted;
  const Value fits = v.at("fits");
  for (size_t i = 0, n = fits.array(kAlgos.size()); i < n; ++i) {
    e.fits.push_back(read_fit(fits.at(i), e.nodes));
    if (!fitted.insert(e.fits.back().algo).second) fits.at(i).at("algo").fail(e.fits.back().algo + " is fitted twice");
  }
  const Value ranges = v.at("ranges");
  size_t from = 0;
  for (size_t i = 0, n = ranges.array(kMaxRanges); i < n; ++i) {
    e.ranges.push_back(read_range(ranges.at(i), fitted, from, i + 1 == n));
    if (e.ranges.back().to_bytes) from = *e.ranges.back().to_bytes + 1;
  }
  return e;
}

}  // namespace

AlgoTable parse_algo_table(const std::string& text, const std::string& file) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(file + ": not JSON: " + quote_excerpt(e.what(), 160));
  }
  const Value root{doc, "", file};
  if (!doc.is_object()) throw Error(file + ": not a cost table (a JSON object)");
  root.object_of({"format", "version", "source", "entries"});
  if (root.at("format").text(64) != kAlgoTableFormat)
    root.at("format").fail("must be \"" + std::string(kAlgoTableFormat) + "\"");
  if (root.at("version").number(0, 1e9) != kAlgoTableVersion)
    root.at("version").fail("version " + Value::fmt(doc["version"].get<double>()) + " is not the one this ringbench reads (" +
                            std::to_string(kAlgoTableVersion) + ")");
  AlgoTable t;
  t.source = root.at("source").text(4096);
  const Value entries = root.at("entries");
  std::set<std::pair<std::string, int>> seen;  // (transport, N)
  for (size_t i = 0, n = entries.array(kMaxEntries); i < n; ++i) {
    t.entries.push_back(read_entry(entries.at(i)));
    const auto& e = t.entries.back();
    if (!seen.insert({e.transport, e.nodes}).second)
      entries.at(i).fail("a second entry for " + e.transport + " N=" + std::to_string(e.nodes));
  }
  return t;
}

AlgoTable read_algo_table(const std::string& path) {
  return parse_algo_table(read_input_file(path, "the --algo-table file", kMaxConfigBytes), path);
}

std::string algo_table_json(const AlgoTable& t) {
  json entries = json::array();
  for (const auto& e : t.entries) {
    json fits = json::array(), ranges = json::array();
    for (const auto& f : e.fits)
      fits.push_back({{"algo", f.algo}, {"alpha_s", f.alpha_s}, {"beta_s_per_byte", f.beta_s_per_byte},
                      {"min_bytes", f.min_bytes}, {"max_bytes", f.max_bytes}, {"r2", f.r2}});
    for (const auto& r : e.ranges) {
      json predicted = json::object();
      for (const auto& [algo, times] : r.predicted_s)
        predicted[algo] = {times.first, times.second ? json(*times.second) : json(nullptr)};
      ranges.push_back({{"from_bytes", r.from_bytes}, {"to_bytes", r.to_bytes ? json(*r.to_bytes) : json(nullptr)},
                        {"algo", r.algo}, {"basis", r.basis}, {"predicted_s", predicted}});
    }
    entries.push_back({{"transport", e.transport}, {"nodes", e.nodes}, {"fits", fits}, {"ranges", ranges}});
  }
  return json{{"format", kAlgoTableFormat}, {"version", kAlgoTableVersion}, {"source", t.source}, {"entries", entries}}
             .dump(1) + "\n";
}

const AlgoTableEntry* find_entry(const AlgoTable& t, const std::string& transport, int nodes) {
  for (const auto& e : t.entries)
    if (e.transport == transport && e.nodes == nodes) return &e;
  return nullptr;
}

std::string ranges_text(const AlgoTableEntry& e) {
  std::string s;
  for (const auto& r : e.ranges)
    s += (s.empty() ? "" : ", ") + r.algo + (r.to_bytes ? " < " + size_text(*r.to_bytes + 1) : " >= " + size_text(r.from_bytes)) +
         (r.basis == "measured" ? "" : " (nearest measured)");
  return s;
}

}  // namespace ringbench
