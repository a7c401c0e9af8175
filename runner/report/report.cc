// report.md, summary.csv and gnuplot SVGs from raw.jsonl alone, and the comparison of two runs.
#include "runner/report/report.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "base/errors.h"
#include "runner/backends/backend.h"
#include "runner/cli/metadata.h"
#include "runner/sweep/json_fields.h"
#include "runner/sweep/point.h"
#include "runner/report/stats.h"
#include "base/subprocess.h"

namespace ringbench {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Statistics and formatting

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// Fixed decimals; never "-0.00".
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

// "4K", "1M", "64M" (binary units, as the -b/-e options take them).
std::string fmt_bytes(uint64_t b) {
  const char* units[] = {"G", "M", "K"};
  for (int i = 0; i < 3; ++i) {
    const uint64_t u = uint64_t(1) << (10 * (3 - i));
    if (b >= u && b % u == 0) return std::to_string(b / u) + units[i];
  }
  return std::to_string(b) + "B";
}

// "x ± ci" with a CI only where there are two samples or more.
std::string with_ci(const MeanCi& m, int decimals, const std::string& unit = "") {
  std::string s = fixed(m.mean, decimals) + unit;
  return m.n >= 2 ? s + " ± " + fixed(m.ci95, decimals) : s;
}

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

// ---------------------------------------------------------------------------------------------
// raw.jsonl

struct Record : PointCoords {
  json j;
  std::string point, status, error, started_at;
  int repeat = 0;
  std::pair<int, size_t> order;  // (seq, position in raw.jsonl): the order the sweep ran it
};

const json* find_at(const json& j, const char* pointer) {
  const json::json_pointer p(pointer);
  return j.contains(p) ? &j.at(p) : nullptr;
}

std::optional<double> number_at(const json& j, const char* pointer) {
  const json* v = find_at(j, pointer);
  return v && v->is_number() ? std::optional<double>(v->get<double>()) : std::nullopt;
}

Record to_record(const json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + " is not a JSON object");
  if (int_or(j, "schema", 0) != 1)
    throw Error(where + ": schema " + (j.contains("schema") ? j["schema"].dump() : "(missing)") +
                " is not the one this ringbench reads (1): report it with the ringbench that ran it");
  Record r;
  r.j = j;
  r.point = required_str(j, "point", where);
  r.repeat = required_int(j, "repeat", where);
  static_cast<PointCoords&>(r) = PointCoords::read(j, where);
  r.status = required_str(j, "status", where);
  if (r.repeat < 1) throw Error(where + ": \"repeat\" must be >= 1");
  if (r.status != "ok" && r.status != "failed" && r.status != "skipped" &&
      r.status != "does_not_fit")
    throw Error(where + ": status \"" + r.status +
                "\" is none of ok, failed, skipped, does_not_fit");
  r.error = str_or(j, "error", "");
  r.started_at = str_or(j, "started_at", "");
  if (r.status == "ok" && r.kind == PointKind::train && !number_at(j, "/train/summary/total_img_s/mean"))
    throw Error(where + ": status ok but train.summary.total_img_s.mean is missing");
  if (r.status == "ok" && r.kind == PointKind::share && !number_at(j, "/share/summary/total_img_s/mean"))
    throw Error(where + ": status ok but share.summary.total_img_s.mean is missing");
  if (r.status == "ok" && r.kind == PointKind::collectives &&
      !(find_at(j, "/collectives/rows") && j["collectives"]["rows"].is_array()))
    throw Error(where + ": status ok but collectives.rows is missing");
  return r;
}

bool is_blank(const std::string& s) { return s.find_first_not_of(" \t\r") == std::string::npos; }

// Every record of raw.jsonl, in file order. An unparsable last line is what a sweep killed
// mid-write leaves: it is dropped with a warning; anywhere else it is an error. Valid JSON that
// is not a record this ringbench reads is left out with a warning.
std::vector<Record> read_records(const std::string& run_dir) {
  const std::string path = run_dir + "/raw.jsonl";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!fs::exists(path))
      throw Error(path + " not found: is " + run_dir + " a sweep's results directory?");
    throw Error("cannot read " + path + ": " + std::strerror(errno));
  }
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  size_t last = lines.size();
  while (last > 0 && is_blank(lines[last - 1])) --last;

  std::vector<Record> records;
  for (size_t i = 0; i < last; ++i) {
    if (is_blank(lines[i])) continue;
    const std::string where = path + " line " + std::to_string(i + 1);
    json j;
    try {
      j = json::parse(lines[i]);
    } catch (const json::exception& e) {  // a syntax error, or a number out of range (1e999)
      if (i + 1 < last) throw Error(where + " is not valid JSON: " + e.what());
      std::cerr << "ringbench report: warning: " << where
                << " is incomplete (the sweep was interrupted while writing it): ignored\n";
      continue;
    }
    // A record of the wrong shape (a hand edit, another tool, a newer schema) is left out
    // with its line number, so the rest of the run still reports.
    try {
      records.push_back(to_record(j, where));
    } catch (const Error& e) {
      std::cerr << "ringbench report: warning: " << e.what() << ": record left out\n";
      continue;
    }
    records.back().order = {int_or(j, "seq", 0), i};
  }
  if (records.empty()) throw Error(path + " has no records: the sweep finished no point");
  return records;
}

// ---------------------------------------------------------------------------------------------
// Points and what is derived from them

struct Straggler {
  int repeat = 0, rank = 0;
  std::string host;
  double median_s = 0, ranks_median_s = 0;
};

struct SizeStats {
  std::set<std::string> algos;
  std::vector<double> time_us, busbw;
  uint64_t wrong = 0;
  bool checked = false;
};

struct WrongResult {
  int repeat = 0;
  uint64_t bytes = 0, wrong = 0;
  bool inplace = false;
};

struct Point : PointCoords {
  std::string id;
  int profile_order = -1;       // the profile's place in the sweep's order ("none": -1)
  std::vector<Record> repeats;  // by repeat number

  // kind train and share, over the ok repeats (share: the VMs' sum, step s mean over VMs)
  std::map<int, double> total;  // total img/s by repeat
  std::vector<double> per_rank;
  std::optional<double> step_s, compute_s, exposed_s, allreduce_s, optimizer_s, hidden;
  std::optional<MeanCi> efficiency, ratio_vs_tcp;
  std::string efficiency_na;  // why there is no efficiency
  std::vector<Straggler> stragglers;

  // kind collectives, out-of-place rows of the ok repeats by size; wrong results of all rows
  std::map<uint64_t, SizeStats> sizes;
  std::vector<WrongResult> wrong;

  // vGPU: the device memory peak (train: rank 0's; share: the VMs'), largest over the ok repeats
  std::optional<double> memory_peak_mib;
  // kind share, over the ok repeats: img/s per VM and step s by repeat, device utilization
  std::map<int, double> per_vm;
  std::optional<double> util_per_vm, util_total;

  std::vector<const Record*> ok() const {
    std::vector<const Record*> v;
    for (const auto& r : repeats)
      if (r.status == "ok") v.push_back(&r);
    return v;
  }
  int count(const std::string& status) const {
    return int(std::count_if(repeats.begin(), repeats.end(),
                             [&](const Record& r) { return r.status == status; }));
  }
  // ok: every repeat ran; skipped: none was attempted; does_not_fit: no repeat fit the
  // profile's framebuffer; failed: anything else.
  std::string status() const {
    const int n = int(repeats.size());
    return count("ok") == n             ? "ok"
           : count("skipped") == n      ? "skipped"
           : count("does_not_fit") == n ? "does_not_fit"
                                        : "failed";
  }
  bool same_config(const Point& o) const {
    return kind == o.kind && model == o.model && batch == o.batch &&
           image_size == o.image_size && profile == o.profile;
  }
};

// Backends in their registered order; none and anything else after, alphabetically.
int transport_rank(const std::string& t) {
  const Backend* b = find_backend(t);
  return b ? b->order : std::numeric_limits<int>::max();
}

int policy_rank(const std::string& policy) {
  const char* order[] = {"best_effort", "equal_share", "fixed_share"};
  for (int i = 0; i < 3; ++i)
    if (policy == order[i]) return i;
  return 3;  // anything else, alphabetically
}

// Train, then share, then collectives; profiles in the sweep's order.
auto order_key(const Point& p) {
  return std::tuple(p.kind == PointKind::train ? 0 : p.kind == PointKind::share ? 1 : 2, p.kind, p.model, p.batch,
                    p.image_size, p.profile_order, p.profile, policy_rank(p.policy), p.policy,
                    p.vms, p.nodes, transport_rank(p.transport), p.transport, p.id);
}

struct Run {
  std::string sweep, run_id;
  json cluster;
  std::vector<std::string> started;  // every started_at, sorted
  std::vector<Point> points;         // in report order
};

// The rank 0 section ("train" or "collectives") of a record.
const json* section(const Record& r) {
  const auto it = r.j.find(kind_name(r.kind));
  return it != r.j.end() && it->is_object() ? &*it : nullptr;
}

std::string host_of(const Record& r, int rank) {
  const json* s = section(r);
  const json* hosts = s ? find_at(*s, "/meta/hosts") : nullptr;
  if (hosts && hosts->is_array())
    for (const auto& h : *hosts)
      if (int_or(h, "rank", -1) == rank) return str_or(h, "host", "?");
  return "?";
}

std::vector<Straggler> find_stragglers(const Record& r, double margin) {
  const json* ranks = find_at(r.j, "/train/ranks");
  if (!ranks || !ranks->is_array() || ranks->size() < 2) return {};
  std::vector<std::pair<int, double>> medians;
  for (const auto& rk : *ranks) {
    std::vector<double> steps;
    if (rk.contains("step_s") && rk["step_s"].is_array())
      for (const auto& s : rk["step_s"])
        if (s.is_number()) steps.push_back(s.get<double>());
    if (!steps.empty()) medians.emplace_back(int_or(rk, "rank", int(medians.size())), median(steps));
  }
  std::vector<double> values;
  for (const auto& m : medians) values.push_back(m.second);
  const double all = median(values);
  std::vector<Straggler> out;
  for (const auto& [rank, m] : medians)
    if (m > all * (1 + margin)) out.push_back({r.repeat, rank, host_of(r, rank), m, all});
  return out;
}

std::optional<double> mean_over(const std::vector<const Record*>& recs, const char* pointer) {
  std::vector<double> v;
  for (const Record* r : recs)
    if (auto x = number_at(r->j, pointer)) v.push_back(*x);
  return v.empty() ? std::nullopt : std::optional<double>(mean_ci(v).mean);
}

std::optional<double> larger(std::optional<double> a, std::optional<double> b) {
  return a && b ? std::max(*a, *b) : a ? a : b;
}

void train_stats(Point& p, double margin) {
  const auto ok = p.ok();
  for (const Record* r : ok) {
    p.total[r->repeat] = *number_at(r->j, "/train/summary/total_img_s/mean");
    if (auto x = number_at(r->j, "/train/summary/img_s_per_rank/mean")) p.per_rank.push_back(*x);
    for (auto& s : find_stragglers(*r, margin)) p.stragglers.push_back(s);
    p.memory_peak_mib =
        larger(p.memory_peak_mib, number_at(r->j, "/train/summary/device_memory/peak_mib"));
  }
  p.step_s = mean_over(ok, "/train/summary/step_s/mean_over_ranks");
  p.compute_s = mean_over(ok, "/train/summary/compute_s/mean_over_ranks");
  p.exposed_s = mean_over(ok, "/train/summary/exposed_s/mean_over_ranks");
  p.allreduce_s = mean_over(ok, "/train/summary/allreduce_s/mean_over_ranks");
  p.optimizer_s = mean_over(ok, "/train/summary/optimizer_s/mean_over_ranks");
  p.hidden = mean_over(ok, "/train/summary/hidden_fraction");
}

void share_stats(Point& p) {
  const auto ok = p.ok();
  for (const Record* r : ok) {
    p.total[r->repeat] = *number_at(r->j, "/share/summary/total_img_s/mean");
    if (auto x = number_at(r->j, "/share/summary/img_s_per_vm/mean")) p.per_vm[r->repeat] = *x;
    const json* vms = find_at(r->j, "/share/vms");
    if (vms && vms->is_array())
      for (const auto& vm : *vms)
        p.memory_peak_mib = larger(p.memory_peak_mib, number_at(vm, "/device_memory_peak_mib"));
  }
  p.step_s = mean_over(ok, "/share/summary/step_s");
  p.util_per_vm = mean_over(ok, "/share/summary/device_util_per_vm");
  p.util_total = mean_over(ok, "/share/summary/device_util_total");  // null: not measured
}

void collectives_stats(Point& p) {
  for (const Record* r : p.ok()) {
    for (const auto& row : r->j["collectives"]["rows"]) {
      if (!row.is_object()) continue;
      const uint64_t bytes = uint_or(row, "bytes", 0), wrong = uint_or(row, "wrong", 0);
      const bool inplace = bool_or(row, "inplace", false);
      const bool checked = row.contains("wrong") && row["wrong"].is_number();
      if (wrong > 0) p.wrong.push_back({r->repeat, bytes, wrong, inplace});
      if (inplace) continue;
      SizeStats& s = p.sizes[bytes];
      s.algos.insert(str_or(row, "algo", "?"));
      if (auto t = number_at(row, "/time_us")) s.time_us.push_back(*t);
      if (auto b = number_at(row, "/busbw_gbps")) s.busbw.push_back(*b);
      s.wrong += wrong;
      s.checked = s.checked || checked;
    }
  }
}

// num[r] / den[r] / scale for every repeat r of num; den's median where den lacks repeat r.
std::vector<double> paired(const std::map<int, double>& num, const std::map<int, double>& den,
                           double scale) {
  std::vector<double> den_values;
  for (const auto& d : den) den_values.push_back(d.second);
  const double den_median = median(den_values);
  std::vector<double> out;
  for (const auto& [repeat, x] : num) {
    const auto it = den.find(repeat);
    const double d = it != den.end() ? it->second : den_median;
    if (d > 0) out.push_back(x / scale / d);
  }
  return out;
}

const Point* find_peer(const std::vector<Point>& points, const Point& p, int nodes,
                       const std::string& transport) {
  for (const auto& o : points)
    if (o.same_config(p) && o.nodes == nodes && o.transport == transport) return &o;
  return nullptr;
}

void cross_point_stats(std::vector<Point>& points) {
  for (auto& p : points) {
    if (p.kind != PointKind::train || p.total.empty()) continue;
    const Point* base = find_peer(points, p, 1, "none");
    if (!base)
      p.efficiency_na = "n/a (no N=1 point)";
    else if (base->total.empty())
      p.efficiency_na = base->status() == "does_not_fit" ? "n/a (N=1 point does not fit)"
                                                          : "n/a (N=1 point failed)";
    else
      p.efficiency = mean_ci(paired(p.total, base->total, p.nodes));
    if (p.transport == kBaselineBackend || p.transport == "none") continue;
    const Point* tcp = find_peer(points, p, p.nodes, kBaselineBackend);
    if (tcp && !tcp->total.empty()) p.ratio_vs_tcp = mean_ci(paired(p.total, tcp->total, 1));
  }
}

// vGPU profiles other than "none" in the order the sweep first ran them (its config's order).
std::map<std::string, int> profile_order(const std::vector<Record>& records) {
  std::map<std::string, std::pair<int, size_t>> first;
  for (const auto& r : records) {
    if (r.profile == "none") continue;
    const auto it = first.find(r.profile);
    if (it == first.end() || r.order < it->second) first[r.profile] = r.order;
  }
  std::vector<std::tuple<std::pair<int, size_t>, std::string>> sorted;
  for (const auto& [name, order] : first) sorted.emplace_back(order, name);
  std::sort(sorted.begin(), sorted.end());
  std::map<std::string, int> out;
  for (size_t i = 0; i < sorted.size(); ++i) out[std::get<1>(sorted[i])] = int(i);
  return out;
}

// The last record of each (point, repeat) wins: a resumed sweep appends the points it re-ran.
std::vector<Point> group_points(std::vector<Record> records) {
  const auto profiles = profile_order(records);
  std::map<std::pair<std::string, int>, Record> latest;
  for (auto& r : records) latest.insert_or_assign({r.point, r.repeat}, std::move(r));
  std::map<std::string, Point> by_id;
  for (auto& [key, r] : latest) {
    Point& p = by_id[r.point];
    if (p.repeats.empty()) {
      p.id = r.point;
      static_cast<PointCoords&>(p) = r;
      if (r.profile != "none") p.profile_order = profiles.at(r.profile);
    }
    p.repeats.push_back(std::move(r));
  }
  std::vector<Point> points;
  for (auto& [id, p] : by_id) points.push_back(std::move(p));
  std::sort(points.begin(), points.end(),
            [](const Point& a, const Point& b) { return order_key(a) < order_key(b); });
  return points;
}

Run load_run(const std::string& run_dir, double straggler_margin) {
  std::vector<Record> records = read_records(run_dir);
  Run run;
  run.sweep = str_or(records.front().j, "sweep", "?");
  run.run_id = str_or(records.front().j, "run_id", "?");
  run.cluster = records.front().j.value("cluster", json::object());
  run.points = group_points(std::move(records));
  for (auto& p : run.points) {
    for (const auto& r : p.repeats)
      if (!r.started_at.empty()) run.started.push_back(r.started_at);
    if (p.kind == PointKind::train) train_stats(p, straggler_margin);
    else if (p.kind == PointKind::share) share_stats(p);
    else collectives_stats(p);
  }
  std::sort(run.started.begin(), run.started.end());
  cross_point_stats(run.points);
  return run;
}

// " b32", " b32 224px".
std::string batch_suffix(const Point& p) {
  return " b" + std::to_string(p.batch) +
         (p.image_size > 0 ? " " + std::to_string(p.image_size) + "px" : "");
}

// " b32 224px" where a model has several (batch, image size), and the profile if any.
std::string config_suffix(const Point& p, bool with_config) {
  std::string s = with_config ? batch_suffix(p) : "";
  if (p.profile != "none") s += " " + p.profile;
  return s;
}

// "lenet n2 tcp", plus the config suffix.
std::string label(const Point& p, bool with_config) {
  return p.model + " n" + std::to_string(p.nodes) + " " + p.transport +
         config_suffix(p, with_config);
}

// Models trained with more than one (batch, image size).
std::set<std::string> multi_config_models(const Run& run) {
  std::map<std::string, std::set<std::pair<int, int>>> configs;
  for (const auto& p : run.points)
    if (p.kind == PointKind::train) configs[p.model].insert({p.batch, p.image_size});
  std::set<std::string> out;
  for (const auto& [model, c] : configs)
    if (c.size() > 1) out.insert(model);
  return out;
}

std::vector<const Point*> points_of(const Run& run, PointKind kind) {
  std::vector<const Point*> v;
  for (const auto& p : run.points)
    if (p.kind == kind) v.push_back(&p);
  return v;
}

bool has_share(const Run& run) { return !points_of(run, PointKind::share).empty(); }

// A run with a vGPU profile other than none or with share points. Only such a run gets the
// vGPU columns, section and definitions: the report of a run without them reads as before.
bool has_vgpu(const Run& run) {
  return std::any_of(run.points.begin(), run.points.end(), [](const Point& p) {
    return p.profile != "none" || p.kind == PointKind::share;
  });
}

// How a record's profile was applied: {mode, message, framebuffer_mib, detected}; a does-not-fit
// record has it at the top level, an ok one in its section's meta.
const json* vgpu_of(const Record& r) {
  const auto it = r.j.find("vgpu");
  if (it != r.j.end() && it->is_object()) return &*it;
  const json* s = section(r);
  const json* v = s ? find_at(*s, "/meta/vgpu") : nullptr;
  return v && v->is_object() ? v : nullptr;
}

// The first record of a point that says how its profile was applied.
const json* vgpu_of(const Point& p) {
  for (const auto& r : p.repeats)
    if (const json* v = vgpu_of(r)) return v;
  return nullptr;
}

// The framebuffer a record ran with, in MiB (none: the whole device, or not known).
std::optional<double> framebuffer_of(const Record& r) {
  for (const char* at : {"/share/meta/framebuffer_mib", "/train/summary/device_memory/cap_mib",
                         "/does_not_fit/framebuffer_mib", "/vgpu/framebuffer_mib",
                         "/train/meta/vgpu/framebuffer_mib", "/train/meta/vgpu/profile_framebuffer_mib",
                         "/vgpu/profile_framebuffer_mib"})
    if (auto v = number_at(r.j, at)) return v;
  return std::nullopt;
}

std::optional<double> framebuffer_of(const Point& p) {
  for (const auto& r : p.repeats)
    if (auto v = framebuffer_of(r)) return v;
  return std::nullopt;
}

// MiB without decimals where whole ("4096"), else with one ("12.5").
std::string mib(double v) { return fixed(v, v == std::floor(v) ? 0 : 1); }

std::string fraction4(const std::optional<double>& v) { return v ? fixed(*v, 4) : ""; }

// ---------------------------------------------------------------------------------------------
// summary.csv

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string csv_line(const std::vector<std::string>& cells) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i) line += ',';
    line += csv_field(cells[i]);
  }
  return line + "\n";
}

std::vector<std::string> train_cells(const Point& p) {
  if (p.total.empty()) return std::vector<std::string>(13, "");
  std::vector<double> totals;
  for (const auto& t : p.total) totals.push_back(t.second);
  const MeanCi t = mean_ci(totals);
  const auto ci = [](const std::optional<MeanCi>& m, int d) {
    return m && m->n >= 2 ? fixed(m->ci95, d) : "";
  };
  return {fixed(median(totals), 2),
          t.n >= 2 ? fixed(t.ci95, 2) : "",
          p.per_rank.empty() ? "" : fixed(median(p.per_rank), 2),
          p.efficiency ? fixed(p.efficiency->mean, 4) : "",
          ci(p.efficiency, 4),
          p.ratio_vs_tcp ? fixed(p.ratio_vs_tcp->mean, 4) : "",
          ci(p.ratio_vs_tcp, 4),
          fixed(p.step_s, 6),
          fixed(p.compute_s, 6),
          fixed(p.exposed_s, 6),
          fixed(p.allreduce_s, 6),
          fixed(p.hidden, 4),
          std::to_string(p.stragglers.size())};
}

// A share point in train's columns: total img/s (the VMs' sum), img/s per VM in the per-rank
// column, step s (mean over VMs); the rest does not apply.
std::vector<std::string> share_cells(const Point& p) {
  std::vector<std::string> cells(13, "");
  if (p.total.empty()) return cells;
  std::vector<double> totals, per_vm;
  for (const auto& t : p.total) totals.push_back(t.second);
  for (const auto& v : p.per_vm) per_vm.push_back(v.second);
  const MeanCi t = mean_ci(totals);
  cells[0] = fixed(median(totals), 2);
  cells[1] = t.n >= 2 ? fixed(t.ci95, 2) : "";
  cells[2] = per_vm.empty() ? "" : fixed(median(per_vm), 2);
  cells[7] = fixed(p.step_s, 6);
  return cells;
}

// Appended to summary.csv when the run has vGPU profiles or share points (see report.h).
std::vector<std::string> vgpu_columns() {
  return {"policy", "vms", "device_util_per_vm", "device_util_total", "device_memory_peak_mib",
          "framebuffer_mib", "vgpu_mode", "repeats_does_not_fit"};
}

std::vector<std::string> vgpu_cells(const Point& p) {
  if (p.kind == PointKind::collectives) return std::vector<std::string>(vgpu_columns().size(), "");
  const bool share = p.kind == PointKind::share;
  const auto fb = framebuffer_of(p);
  const json* v = vgpu_of(p);
  return {p.policy,
          share ? std::to_string(p.vms) : "",
          fraction4(p.util_per_vm),
          fraction4(p.util_total),
          p.memory_peak_mib ? fixed(*p.memory_peak_mib, 1) : "",
          fb ? mib(*fb) : "",
          v ? str_or(*v, "mode", "") : "",
          std::to_string(p.count("does_not_fit"))};
}

// The size with the highest median busbw.
std::optional<std::pair<uint64_t, double>> peak_busbw(const Point& p) {
  std::optional<std::pair<uint64_t, double>> best;
  for (const auto& [bytes, s] : p.sizes)
    if (!s.busbw.empty() && (!best || median(s.busbw) > best->second))
      best = std::pair(bytes, median(s.busbw));
  return best;
}

std::string summary_csv(const Run& run) {
  std::string csv = csv_line(
      {"kind", "point", "model", "batch", "image_size", "nodes", "transport", "profile",
       "repeats_ok", "repeats_failed", "total_img_s_median", "total_img_s_ci95",
       "img_s_per_rank_median", "efficiency_mean", "efficiency_ci95", "ratio_vs_tcp_mean",
       "ratio_vs_tcp_ci95", "step_s", "compute_s", "exposed_s", "allreduce_s", "hidden_fraction",
       "stragglers", "busbw_gbps_max", "busbw_at_bytes"});
  const bool vgpu = has_vgpu(run);
  if (vgpu) {
    csv.pop_back();
    csv += "," + csv_line(vgpu_columns());
  }
  for (const auto& p : run.points) {
    const bool train = p.kind == PointKind::train, model = p.has_model();
    std::vector<std::string> cells = {
        kind_name(p.kind), p.id, p.model, model ? std::to_string(p.batch) : "",
        model ? std::to_string(p.image_size) : "", std::to_string(p.nodes), p.transport, p.profile,
        std::to_string(p.count("ok")), std::to_string(p.count("failed"))};
    const auto more = train ? train_cells(p)
                      : model ? share_cells(p)
                              : std::vector<std::string>(13, "");
    cells.insert(cells.end(), more.begin(), more.end());
    const auto peak = model ? std::nullopt : peak_busbw(p);
    cells.push_back(peak ? fixed(peak->second, 3) : "");
    cells.push_back(peak ? std::to_string(peak->first) : "");
    if (vgpu) {
      const auto extra = vgpu_cells(p);
      cells.insert(cells.end(), extra.begin(), extra.end());
    }
    csv += csv_line(cells);
  }
  return csv;
}

// ---------------------------------------------------------------------------------------------
// Plots: a gnuplot script and its data beside each SVG in RUN_DIR/plots, so users can tweak them

// Runs `gnuplot SCRIPT` in `dir` (the script names its data files relative to it) and returns
// what it wrote to stdout: the SVG.
std::string run_gnuplot(const std::string& gnuplot, const std::string& dir,
                        const std::string& script) {
  const ProcessOutput o = run_process(gnuplot, {"gnuplot", script}, dir);
  if (!o.ok() || o.out.empty())
    throw Error("gnuplot failed on plots/" + script + " (" + gnuplot + "): " +
                one_line(o.err.empty() ? "exit status " + std::to_string(o.status) : o.err));
  if (!o.err.empty()) std::cerr << "ringbench report: gnuplot on plots/" << script << ": " << o.err;
  return o.out;
}

std::string gp_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

std::string num6(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

struct Series {
  std::string title;
  std::vector<std::array<double, 3>> rows;  // x, y, error
};

struct Plot {
  std::string name, title, xlabel, ylabel, setup, plot, dat;
};

// Data blocks of `series` (gnuplot's `index`) and the plot clauses that draw them.
void add_series(Plot& plot, const std::vector<Series>& series, const std::string& style) {
  for (size_t i = 0; i < series.size(); ++i) {
    plot.dat += "# " + series[i].title + "\n";
    for (const auto& r : series[i].rows)
      plot.dat += num6(r[0]) + " " + num6(r[1]) + " " + num6(r[2]) + "\n";
    plot.dat += "\n\n";
    plot.plot += plot.plot.empty() ? "plot " : ", \\\n     ";
    plot.plot += gp_quote(plot.name + ".dat") + " index " + std::to_string(i) + " using 1:2:3 with " +
                 style + " title " + gp_quote(series[i].title);
  }
}

std::string gp_script(const Plot& p) {
  return "# " + p.name + ".svg from " + p.name + ".dat, written by `ringbench report`.\n" +
         "# Regenerate: gnuplot " + p.name + ".gp > " + p.name + ".svg\n" +
         "set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'\n" +
         "set title " + gp_quote(p.title) + " noenhanced\n" +
         "set xlabel " + gp_quote(p.xlabel) + "\n" +
         "set ylabel " + gp_quote(p.ylabel) + "\n" +
         "set grid\nset key outside right top noenhanced\n" + p.setup + p.plot + "\n";
}

class Plotter {
 public:
  Plotter(const std::string& run_dir, bool wanted) : dir_(run_dir + "/plots") {
    if (!wanted) {
      note_ = "Plots skipped: turned off.";
      return;
    }
    gnuplot_ = find_on_path("gnuplot");
    if (gnuplot_.empty()) note_ = "Plots skipped: gnuplot not found (apt-get install gnuplot-nox).";
  }
  bool enabled() const { return note_.empty(); }
  const std::string& note() const { return note_; }

  void render(const Plot& p) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) throw Error("cannot create " + dir_ + ": " + ec.message());
    write_file_atomic(dir_ + "/" + p.name + ".dat", p.dat);
    write_file_atomic(dir_ + "/" + p.name + ".gp", gp_script(p));
    write_file_atomic(dir_ + "/" + p.name + ".svg", run_gnuplot(gnuplot_, dir_, p.name + ".gp"));
  }

 private:
  std::string dir_, gnuplot_, note_;
};

// A file name made of the model's name (letters, digits, '-', '_', '.').
std::string file_safe(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return s;
}

std::string nodes_axis(const std::vector<const Point*>& pts) {
  std::set<int> nodes;
  for (const Point* p : pts) nodes.insert(p->nodes);
  std::string tics;
  for (int n : nodes) tics += (tics.empty() ? "" : ", ") + std::to_string(n);
  return "set xrange [" + fixed(*nodes.begin() - 0.5, 1) + ":" + fixed(*nodes.rbegin() + 0.5, 1) +
         "]\nset xtics (" + tics + ")\n";
}

// One series per (config, transport) of a model; every series starts at its N=1 point.
template <class Value>
std::vector<Series> model_series(const Run& run, const std::vector<const Point*>& pts, Value value) {
  const bool multi = multi_config_models(run).count(pts.front()->model) > 0;
  std::map<std::string, Series> by_title;
  std::vector<std::string> order;
  for (const Point* p : pts) {
    const auto v = value(*p);
    if (!v || (p->nodes == 1 && p->transport == "none")) continue;
    const std::string title = p->transport + config_suffix(*p, multi);
    if (!by_title.count(title)) {
      order.push_back(title);
      by_title[title].title = title;
      const Point* base = find_peer(run.points, *p, 1, "none");
      if (const auto b = base ? value(*base) : std::nullopt)
        by_title[title].rows.push_back({1, (*b)[0], (*b)[1]});
    }
    by_title[title].rows.push_back({double(p->nodes), (*v)[0], (*v)[1]});
  }
  std::vector<Series> out;
  for (const auto& t : order) out.push_back(by_title[t]);
  return out;
}

using Pair = std::optional<std::array<double, 2>>;

Pair throughput_value(const Point& p) {
  if (p.total.empty()) return std::nullopt;
  std::vector<double> v;
  for (const auto& t : p.total) v.push_back(t.second);
  return std::array<double, 2>{median(v), mean_ci(v).ci95};
}

Pair efficiency_value(const Point& p) {
  if (!p.efficiency) return std::nullopt;
  return std::array<double, 2>{p.efficiency->mean, p.efficiency->ci95};
}

// The plots of one model; returns the names of those drawn.
std::vector<std::string> model_plots(const Run& run, const std::vector<const Point*>& pts,
                                     Plotter& plotter) {
  const std::string model = pts.front()->model, base = file_safe(model);
  std::vector<std::string> drawn;
  const auto draw = [&](const std::string& kind, const std::string& title,
                        const std::string& ylabel, const std::vector<Series>& series,
                        const std::string& setup, const std::string& extra) {
    if (series.empty()) return;
    Plot p{base + "-" + kind, title, "nodes (N, one rank each)", ylabel, nodes_axis(pts) + setup,
           "", ""};
    add_series(p, series, "yerrorlines");
    p.plot += extra;
    plotter.render(p);
    drawn.push_back(p.name);
  };
  draw("throughput", model + ": total img/s vs nodes (median over repeats, 95% CI)", "total img/s",
       model_series(run, pts, throughput_value), "set yrange [0:*]\n", "");
  const auto efficiency = model_series(run, pts, efficiency_value);
  double top = 1;  // room above the ideal line
  for (const auto& s : efficiency)
    for (const auto& r : s.rows) top = std::max(top, r[1] + r[2]);
  draw("efficiency", model + ": scaling efficiency vs nodes (mean over repeats, 95% CI)",
       "scaling efficiency", efficiency,
       "set yrange [0:" + fixed(1.15 * top, 2) + "]\n",
       ", \\\n     1 with lines dt 2 lc rgb 'gray40' title 'ideal'");
  return drawn;
}

bool busbw_plot(const Run& run, Plotter& plotter) {
  std::vector<Series> series;
  for (const Point* p : points_of(run, PointKind::collectives)) {
    Series s{p->transport + " N=" + std::to_string(p->nodes) +
                 (p->profile != "none" ? " " + p->profile : ""), {}};
    for (const auto& [bytes, st] : p->sizes)
      if (!st.busbw.empty())
        s.rows.push_back({double(bytes), median(st.busbw), mean_ci(st.busbw).ci95});
    if (!s.rows.empty()) series.push_back(s);
  }
  if (series.empty()) return false;
  Plot p{"busbw", "allreduce busbw vs message size (out-of-place, median over repeats, 95% CI)",
         "message size (bytes)", "busbw (GB/s)",
         "set logscale x 2\nset format x '%.0b%BB'\nset yrange [0:*]\n", "", ""};
  add_series(p, series, "yerrorlines");
  plotter.render(p);
  return true;
}

bool time_breakdown_plot(const Run& run, Plotter& plotter) {
  const auto multi = multi_config_models(run);
  Plot p{"time-breakdown", "where a training step goes (seconds, mean over ranks and repeats)", "",
         "seconds per step",
         "set style data histograms\nset style histogram rowstacked\n"
         "set style fill solid 0.85 border -1\nset boxwidth 0.7\n"
         "set xtics rotate by -30 left noenhanced\nset yrange [0:*]\n",
         "plot 'time-breakdown.dat' using 2:xtic(1) title 'compute', '' using 3 title 'exposed comm', "
         "'' using 4 title 'optimizer'",
         "# point compute_s exposed_s optimizer_s\n"};
  bool any = false;
  for (const Point* pt : points_of(run, PointKind::train)) {
    if (!pt->compute_s || !pt->exposed_s || !pt->optimizer_s) continue;
    std::string l = label(*pt, multi.count(pt->model) > 0);
    std::replace(l.begin(), l.end(), '"', '\'');
    p.dat += "\"" + l + "\" " + num6(*pt->compute_s) + " " + num6(*pt->exposed_s) + " " +
             num6(*pt->optimizer_s) + "\n";
    any = true;
  }
  if (any) plotter.render(p);
  return any;
}

// The share points of one model by sharing row: (profile, policy) in report order, and each
// row's points by number of VMs.
struct ShareRow {
  const Point* first = nullptr;  // any point of the row, for its profile, policy and config
  std::map<int, const Point*> by_vms;
};

std::vector<ShareRow> share_rows(const std::vector<const Point*>& pts) {
  std::vector<ShareRow> rows;
  for (const Point* p : pts) {
    const Point* last = rows.empty() ? nullptr : rows.back().first;
    if (!last || !last->same_config(*p) || last->policy != p->policy) rows.push_back({p, {}});
    rows.back().by_vms[p->vms] = p;
  }
  return rows;
}

// The VM counts other than 1 of the share points.
std::set<int> shared_vms(const std::vector<const Point*>& pts) {
  std::set<int> ks;
  for (const Point* p : pts)
    if (p->vms > 1) ks.insert(p->vms);
  return ks;
}

std::string vms_text(int vms) { return std::to_string(vms) + (vms == 1 ? " VM" : " VMs"); }

// Models shared with more than one (batch, image size).
bool multi_share_config(const std::vector<const Point*>& pts) {
  std::set<std::pair<int, int>> configs;
  for (const Point* p : pts) configs.insert({p->batch, p->image_size});
  return configs.size() > 1;
}

// Mean over the ok repeats of a share point of the number at `pointer`, with its CI.
std::optional<MeanCi> over_repeats(const Point& p, const char* pointer) {
  std::vector<double> v;
  for (const Record* r : p.ok())
    if (auto x = number_at(r->j, pointer)) v.push_back(*x);
  return v.empty() ? std::nullopt : std::optional<MeanCi>(mean_ci(v));
}

// The sharing plots of one model: categories (the x axis) are the profiles in the sweep's
// order, one bar per series side by side in each.
std::vector<std::string> share_plots(const std::vector<const Point*>& pts, Plotter& plotter) {
  const std::string model = pts.front()->model, base = file_safe(model);
  const bool multi = multi_share_config(pts);
  std::vector<std::string> profiles;  // in the sweep's order: pts are sorted by it
  for (const Point* p : pts)
    if (std::find(profiles.begin(), profiles.end(), p->profile) == profiles.end())
      profiles.push_back(p->profile);
  const auto x_of = [&](const Point& p) {
    return double(std::find(profiles.begin(), profiles.end(), p.profile) - profiles.begin());
  };
  std::string tics;
  for (size_t i = 0; i < profiles.size(); ++i)
    tics += (i ? ", " : "") + gp_quote(profiles[i]) + " " + std::to_string(i);
  const std::string axis = "set xrange [-0.5:" + fixed(double(profiles.size()) - 0.5, 1) +
                           "]\nset xtics (" + tics + ") noenhanced\n";

  // One series per (policy, want, config): `value` gives a point's [y, error] or nothing.
  using Value = std::function<Pair(const Point&)>;
  struct Want {
    bool alone;        // the 1 VM points, else those with k VMs
    std::string what;  // added to the series' title
    Value value;
  };
  const auto rows = share_rows(pts);
  std::vector<std::string> policies;
  for (const auto& row : rows)
    if (std::find(policies.begin(), policies.end(), row.first->policy) == policies.end())
      policies.push_back(row.first->policy);
  std::sort(policies.begin(), policies.end(), [](const std::string& a, const std::string& b) {
    return std::pair(policy_rank(a), a) < std::pair(policy_rank(b), b);
  });
  std::vector<std::string> drawn;
  const auto draw = [&](const std::string& kind, const std::string& title,
                        const std::string& ylabel, const std::vector<Want>& wants,
                        const std::string& yrange) {
    std::vector<Series> series;
    for (const auto& policy : policies)
      for (const auto& want : wants) {
        std::map<std::string, Series> by_title;
        std::vector<std::string> order;
        for (const auto& row : rows)
          for (const auto& [vms, p] : row.by_vms) {
            if (p->policy != policy || want.alone != (vms == 1)) continue;
            const auto v = want.value(*p);
            if (!v) continue;
            const std::string t = policy + ", " + vms_text(vms) +
                                  (want.what.empty() ? "" : ", " + want.what) +
                                  (multi ? batch_suffix(*p) : "");
            if (!by_title.count(t)) order.push_back(t);
            by_title[t].title = t;
            by_title[t].rows.push_back({x_of(*p), (*v)[0], (*v)[1]});
          }
        for (const auto& t : order) series.push_back(by_title[t]);
      }
    if (series.empty()) return;
    const double width = 0.8 / double(series.size());
    for (size_t i = 0; i < series.size(); ++i)
      for (auto& r : series[i].rows) r[0] += (double(i) - double(series.size() - 1) / 2) * width;
    Plot p{base + "-" + kind, title, "vGPU profile", ylabel,
           axis + "set key below noenhanced\nset style fill solid 0.8 border -1\nset boxwidth " +
               num6(width) + " absolute\nset yrange " + yrange + "\n",
           "", ""};
    add_series(p, series, "boxerrorbars");
    plotter.render(p);
    drawn.push_back(p.name);
  };
  const auto from = [](const char* pointer, double scale) {
    return Value([pointer, scale](const Point& p) -> Pair {
      const auto m = over_repeats(p, pointer);
      if (!m) return std::nullopt;
      return std::array<double, 2>{scale * m->mean, scale * m->ci95};
    });
  };
  const Value per_vm = [](const Point& p) -> Pair {
    if (p.per_vm.empty()) return std::nullopt;
    std::vector<double> v;
    for (const auto& x : p.per_vm) v.push_back(x.second);
    return std::array<double, 2>{median(v), mean_ci(v).ci95};
  };
  draw("share-step-time", model + ": step time, 1 VM alone and k VMs on one device (mean, 95% CI)",
       "seconds per step (mean over VMs)",
       {{true, "", from("/share/summary/step_s", 1)},
        {false, "", from("/share/summary/step_s", 1)}},
       "[0:*]");
  draw("share-utilization", model + ": device utilization, 1 VM alone and k VMs (mean, 95% CI)",
       "device utilization (%)",
       {{true, "per VM", from("/share/summary/device_util_per_vm", 100)},
        {false, "device total", from("/share/summary/device_util_total", 100)}},
       "[0:110]");
  draw("share-throughput", model + ": img/s per VM, 1 VM alone and k VMs (median, 95% CI)",
       "img/s per VM", {{true, "", per_vm}, {false, "", per_vm}},
       "[0:*]");
  return drawn;
}

// ---------------------------------------------------------------------------------------------
// report.md

std::string md_cell(std::string s) {
  std::string out;
  for (char c : one_line(std::move(s))) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

// `align`: one 'l' or 'r' per column.
std::string md_table(const std::vector<std::string>& head, const std::string& align,
                     const std::vector<std::vector<std::string>>& rows) {
  std::string t = "|", rule = "|";
  for (size_t i = 0; i < head.size(); ++i) {
    t += " " + md_cell(head[i]);
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

std::string cluster_line(const json& c) {
  std::string s = "Cluster: " + str_or(c, "type", "?");
  s += c.contains("link") && c["link"].is_string() ? ", " + c["link"].get<std::string>() + " links"
                                                   : ", links not rate-limited";
  if (c.contains("cpus_per_node") && c["cpus_per_node"].is_number_integer()) {
    const int cpus = c["cpus_per_node"].get<int>();
    s += ", " + std::to_string(cpus) + (cpus == 1 ? " CPU" : " CPUs") + " per node";
  }
  const std::string note = str_or(c, "note", "");
  return s + (note.empty() ? "" : " (" + note + ")") + ".\n";
}

std::string md_header(const Run& run, const Plotter& plotter) {
  std::string md = "# ringbench sweep `" + run.sweep + "`, run `" + run.run_id + "`\n\n";
  for (const auto& p : run.points)
    for (const auto& w : p.wrong)
      md += "> **FAILED: wrong results.** " + p.id + " repeat " + std::to_string(w.repeat) + ": " +
            std::to_string(w.wrong) + " wrong elements at " + fmt_bytes(w.bytes) +
            (w.inplace ? " (in-place)" : " (out-of-place)") +
            ". The allreduce computed a wrong sum: no number of this run can be trusted.\n\n";
  md += cluster_line(run.cluster);
  if (!run.started.empty())
    md += "Points started from " + run.started.front() + " to " + run.started.back() + ".\n";
  std::map<std::string, int> points, repeats;
  for (const auto& p : run.points) {
    ++points[p.status()];
    for (const auto& r : p.repeats) ++repeats[r.status];
  }
  // "does not fit" only where a point or repeat did not fit: a run without reads as before.
  const bool misfit = repeats.count("does_not_fit") > 0;
  const auto counts = [misfit](std::map<std::string, int>& m) {
    return std::to_string(m["ok"]) + " ok, " +
           (misfit ? std::to_string(m["does_not_fit"]) + " does not fit, " : "") +
           std::to_string(m["failed"]) + " failed, " + std::to_string(m["skipped"]) + " skipped";
  };
  md += "Points: " + counts(points) + " (repeats: " + counts(repeats) + ").\n\n";
  if (!plotter.enabled()) md += plotter.note() + "\n\n";
  return md;
}

// Definitions of what only runs with vGPU profiles or share points report.
std::string vgpu_definitions(const Run& run) {
  if (!has_vgpu(run)) return "";
  std::string md =
      "- **does not fit**: the model and batch need more device memory than the profile's "
      "framebuffer (emulated: the framebuffer is a hard cap on the backend's memory, as a real "
      "vGPU runs out of memory). A result, not a failure.\n";
  if (!has_share(run)) return md;
  return md +
         "- **device utilization** (per VM): the time a VM held the device / its wall time, over "
         "its measured steps; mean over VMs and repeats. **device total**: the fraction of the "
         "common window (the time in which every VM was measuring) during which any VM held the "
         "device; mean over repeats.\n"
         "- **per-VM img/s, k vs 1** = img/s per VM with k VMs on the device / img/s of one VM "
         "alone, same profile, policy, model, batch and image size; paired by repeat, median ± "
         "CI.\n";
}

std::string md_definitions(const ReportOptions& opts, const Run& run) {
  char margin[32];
  std::snprintf(margin, sizeof margin, "%g%%", 100 * opts.straggler_margin);
  return std::string("## Definitions\n\n") +
         "- **total img/s**: images per second summed over the ranks, averaged over a run's "
         "measured steps. Tables give the median over repeats ± the CI.\n"
         "- **scaling efficiency(N)** = (total img/s at N / N) / (img/s at N=1), same model, batch, "
         "image size and profile. Computed per repeat (repeat r at N over repeat r at N=1, or over "
         "the N=1 median when that repeat is missing), then mean ± CI; 1.0 is linear scaling.\n"
         "- **X vs tcp** = total img/s with transport X / total img/s with tcp at the same N, "
         "paired by repeat, mean ± CI.\n"
         "- **CI**: 95% Student-t confidence interval of the mean over repeats (none with one "
         "repeat).\n"
         "- **step, compute, exposed comm, optimizer**: seconds per step, mean over ranks and "
         "repeats. Exposed comm is the allreduce time not hidden behind backward; hidden % = 1 - "
         "exposed / allreduce.\n"
         "- **straggler**: a rank whose median step time exceeds the median of all ranks' median "
         "step times by more than " + margin + " (the straggler margin).\n"
         "- **busbw** = algbw × 2(N-1)/N (as nccl-tests), GB = 10^9 bytes; time is the slowest "
         "rank's mean.\n" +
         vgpu_definitions(run) + "\n";
}

std::string stragglers_cell(const Point& p) {
  std::map<int, int> by_rank;
  for (const auto& s : p.stragglers) ++by_rank[s.rank];
  std::string c;
  for (const auto& [rank, n] : by_rank)
    c += (c.empty() ? "" : ", ") + ("rank " + std::to_string(rank)) + " in " + std::to_string(n) +
         "/" + std::to_string(p.total.size());
  return c.empty() ? "-" : c;
}

// What a point without results says in a table: skipped, does not fit or failed.
std::string not_ok_text(const Point& p) {
  const std::string s = p.status();
  return s == "skipped" ? "skipped" : s == "does_not_fit" ? "does not fit" : "failed";
}

std::vector<std::string> train_row(const Point& p) {
  std::vector<std::string> row = {std::to_string(p.nodes), p.transport, p.profile};
  if (p.total.empty()) {
    const std::string why = not_ok_text(p);
    row.insert(row.end(), {why, "", "", "", "", "", "", ""});
    return row;
  }
  std::vector<double> totals;
  for (const auto& t : p.total) totals.push_back(t.second);
  MeanCi total = mean_ci(totals);
  total.mean = median(totals);
  const auto secs = [](const std::optional<double>& v) { return v ? fixed(*v, 4) : "-"; };
  row.push_back(with_ci(total, 1));
  row.push_back(p.per_rank.empty() ? "-" : fixed(median(p.per_rank), 1));
  row.push_back(p.efficiency ? with_ci(*p.efficiency, 3) : p.efficiency_na);
  row.push_back(secs(p.step_s));
  row.push_back(secs(p.compute_s));
  row.push_back(secs(p.exposed_s));
  row.push_back(p.hidden ? percent(*p.hidden) : "-");
  row.push_back(stragglers_cell(p));
  return row;
}

// "mpi vs tcp" tables of one (model, batch, image size); `suffix` names it in the heading.
std::string md_ratios(const std::vector<const Point*>& pts, const std::string& suffix) {
  std::map<std::string, std::vector<const Point*>> by_transport;
  std::vector<std::string> order;
  for (const Point* p : pts) {
    if (!p->ratio_vs_tcp) continue;
    if (!by_transport.count(p->transport)) order.push_back(p->transport);
    by_transport[p->transport].push_back(p);
  }
  std::string md;
  for (const auto& t : order) {
    std::vector<std::vector<std::string>> rows;
    for (const Point* p : by_transport[t]) {
      const Point* tcp = nullptr;
      for (const Point* o : pts)
        if (o->nodes == p->nodes && o->profile == p->profile && o->transport == kBaselineBackend) tcp = o;
      rows.push_back({std::to_string(p->nodes), p->profile, fixed((*throughput_value(*p))[0], 1),
                      fixed((*throughput_value(*tcp))[0], 1), with_ci(*p->ratio_vs_tcp, 3, "×")});
    }
    md += "### " + t + " vs tcp" + suffix + "\n\n" +
          md_table({"N", "profile", t + " total img/s", "tcp total img/s", t + " / tcp"}, "rlrrr",
                   rows);
  }
  return md;
}

std::string config_text(const Point& p) {
  return "batch " + std::to_string(p.batch) + " per rank, " +
         (p.image_size > 0 ? "image size " + std::to_string(p.image_size) : "default image size");
}

// One table per (batch, image size) of a model, its ratio tables, then the model's plots.
std::string md_model(const Run& run, const std::vector<const Point*>& pts, Plotter& plotter) {
  const std::string model = pts.front()->model;
  const bool multi = multi_config_models(run).count(model) > 0;
  std::string md = "## " + model + "\n\n";
  for (size_t i = 0; i < pts.size();) {
    std::vector<const Point*> config;
    for (const Point* first = pts[i]; i < pts.size() && pts[i]->batch == first->batch &&
                                      pts[i]->image_size == first->image_size;
         ++i)
      config.push_back(pts[i]);
    const std::string text = config_text(*config.front());
    md += multi ? "### " + text + "\n\n" : "Training with " + text + ".\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const Point* p : config) rows.push_back(train_row(*p));
    md += md_table({"N", "transport", "profile", "total img/s", "img/s per rank",
                    "scaling efficiency", "step s", "compute s", "exposed comm s", "hidden %",
                    "stragglers"},
                   "rllrrrrrrrl", rows);
    md += md_ratios(config, multi ? " (" + text + ")" : "");
  }
  if (plotter.enabled())
    for (const auto& name : model_plots(run, pts, plotter))
      md += image(name.substr(file_safe(model).size() + 1) + " of " + model, name);
  return md;
}

std::string md_train(const Run& run, Plotter& plotter) {
  std::string md;
  const auto train = points_of(run, PointKind::train);
  for (size_t i = 0; i < train.size();) {
    std::vector<const Point*> model;
    for (const std::string& m = train[i]->model; i < train.size() && train[i]->model == m; ++i)
      model.push_back(train[i]);
    md += md_model(run, model, plotter);
  }
  return md;
}

std::string md_time(const Run& run, Plotter& plotter) {
  const auto multi = multi_config_models(run);
  std::vector<std::vector<std::string>> rows;
  for (const Point* p : points_of(run, PointKind::train)) {
    if (!p->step_s || !p->compute_s || !p->exposed_s || !p->optimizer_s) continue;
    rows.push_back({label(*p, multi.count(p->model) > 0), fixed(*p->step_s, 4),
                    fixed(*p->compute_s, 4), fixed(*p->exposed_s, 4), fixed(*p->optimizer_s, 4),
                    p->allreduce_s ? fixed(*p->allreduce_s, 4) : "-",
                    p->hidden ? percent(*p->hidden) : "-"});
  }
  if (rows.empty()) return "";
  std::string md =
      "## Where the time goes\n\nSeconds per step, mean over ranks and repeats: step = compute "
      "(input, forward, backward) + exposed comm (waiting for the allreduce after backward) + "
      "optimizer. The allreduce runs during backward: only its exposed part adds to the "
      "step.\n\n" +
      md_table({"point", "step s", "compute s", "exposed comm s", "optimizer s", "allreduce s",
                "hidden %"},
               "lrrrrrr", rows);
  if (plotter.enabled() && time_breakdown_plot(run, plotter))
    md += image("time per step: compute, exposed comm, optimizer", "time-breakdown");
  return md;
}

std::string md_stragglers(const Run& run, const ReportOptions& opts) {
  const auto train = points_of(run, PointKind::train);
  if (train.empty()) return "";
  char margin[32];
  std::snprintf(margin, sizeof margin, "%g%%", 100 * opts.straggler_margin);
  std::string md = std::string("## Stragglers\n\nIn every ok training run, each rank's median step ") +
                   "time against the median of the ranks' medians; flagged above it by more than " +
                   margin + ".\n\n";
  std::vector<std::vector<std::string>> rows;
  for (const Point* p : train)
    for (const auto& s : p->stragglers)
      rows.push_back({p->id, std::to_string(s.repeat), std::to_string(s.rank), s.host,
                      fixed(s.median_s, 4), fixed(s.ranks_median_s, 4),
                      percent(s.median_s / s.ranks_median_s - 1)});
  if (rows.empty()) return md + "No straggler.\n\n";
  return md + md_table({"point", "repeat", "rank", "host", "rank's median step s",
                        "ranks' median s", "excess"},
                       "lrrlrrr", rows);
}

// ---------------------------------------------------------------------------------------------
// vGPU profiles: how each ran here, whether the models fit, and k VMs sharing one device

bool whole_gpu(const std::string& profile) {
  return profile == "passthrough" || profile == "bare-metal";
}

// What the records say about one profile.
struct ProfileInfo {
  std::string name, gpu;
  std::optional<double> framebuffer;
  std::optional<int> max_instances;
  const json* vgpu = nullptr;   // of the first record, in the sweep's order, that has it
  std::set<std::string> modes;  // of every record that has it
};

std::vector<ProfileInfo> profile_infos(const Run& run) {
  std::map<std::pair<int, std::string>, std::vector<const Record*>> by_profile;
  for (const auto& p : run.points)
    if (p.profile != "none")
      for (const auto& r : p.repeats) by_profile[{p.profile_order, p.profile}].push_back(&r);
  std::vector<ProfileInfo> out;
  for (auto& [key, recs] : by_profile) {
    std::sort(recs.begin(), recs.end(),
              [](const Record* a, const Record* b) { return a->order < b->order; });
    ProfileInfo info;
    info.name = key.second;
    for (const Record* r : recs) {
      const json* v = vgpu_of(*r);
      if (v && !info.vgpu) info.vgpu = v;
      if (v) info.modes.insert(str_or(*v, "mode", "?"));
      const json* gpu = find_at(r->j, "/share/meta/gpu");
      if (info.gpu.empty() && gpu && gpu->is_string()) info.gpu = gpu->get<std::string>();
      if (info.gpu.empty() && v) info.gpu = str_or(*v, "gpu", "");
      if (!info.framebuffer) info.framebuffer = framebuffer_of(*r);
      const json* max = find_at(r->j, "/share/meta/max_instances");
      if (!max && v && v->contains("max_instances")) max = &(*v)["max_instances"];
      if (!info.max_instances && max && max->is_number_integer())
        info.max_instances = max->get<int>();
    }
    // NVIDIA names a vGPU type after its GPU: "T4-4C" is a T4's, "A100D-1-10C" an A100D's.
    const size_t dash = info.name.find('-');
    if (info.gpu.empty() && !whole_gpu(info.name) && dash != std::string::npos)
      info.gpu = info.name.substr(0, dash);
    out.push_back(info);
  }
  return out;
}

std::string framebuffer_text(const std::optional<double>& fb, const std::string& profile) {
  return fb ? mib(*fb) : whole_gpu(profile) ? "whole GPU" : "-";
}

// "emulated: why", "real", "mismatch: why".
std::string how_ran(const ProfileInfo& info) {
  if (!info.vgpu) return "not known (no repeat reached the device)";
  const std::string mode = str_or(*info.vgpu, "mode", "?");
  const std::string message = one_line(str_or(*info.vgpu, "message", ""));
  std::string s = mode == "real" || message.empty() ? mode : mode + ": " + message;
  if (info.modes.size() > 1) {
    std::string all;
    for (const auto& m : info.modes) all += (all.empty() ? "" : ", ") + m;
    s += " (records differ: " + all + ")";
  }
  return s;
}

std::string md_profiles(const Run& run) {
  std::vector<std::vector<std::string>> rows;
  std::map<std::string, std::string> by_mode;  // mode -> "T4-4C, P40-1Q"
  for (const auto& info : profile_infos(run)) {
    rows.push_back({info.name, info.gpu.empty() ? "-" : info.gpu,
                    framebuffer_text(info.framebuffer, info.name),
                    info.max_instances ? std::to_string(*info.max_instances) : "-", how_ran(info)});
    const std::string mode = info.vgpu ? str_or(*info.vgpu, "mode", "?") : "not known";
    by_mode[mode] += (by_mode[mode].empty() ? "" : ", ") + info.name;
  }
  const auto names = [&](const std::string& mode) {
    return by_mode.count(mode) ? by_mode[mode] : std::string("none");
  };
  std::string md =
      "### Profiles\n\nHow each profile ran here, as the first of its records says (vGPU mode "
      "and message).\n\n" +
      md_table({"profile", "GPU", "framebuffer MiB", "vGPUs per GPU", "how it ran here"}, "llrrl",
               rows) +
      "Real vGPU: " + names("real") + ". Emulated: " + names("emulated") +
      " (the framebuffer is a hard cap on the backend's memory, and k VMs are time-sliced by "
      "ringbench's own scheduler, each an independent training job: these numbers show what the "
      "profile's limits do on this machine, not a real vGPU's speed).";
  if (by_mode.count("mismatch"))
    md += " Mismatch (the profile is not this machine's vGPU, run anyway): " + names("mismatch") +
          ".";
  if (by_mode.count("not known")) md += " Not known (nothing ran): " + names("not known") + ".";
  return md + "\n\n";
}

// "fits: peak X MiB (Y% of the framebuffer)", "does not fit: needs ≥ X MiB (...)".
std::string fit_text(const Point& p, const std::optional<double>& fb) {
  if (!p.total.empty()) {
    std::string s = "fits";
    if (p.memory_peak_mib) {
      s += ": peak " + fixed(*p.memory_peak_mib, 1) + " MiB";
      if (fb && *fb > 0)
        s += " (" + fixed(100 * *p.memory_peak_mib / *fb, 1) + "% of the framebuffer)";
    }
    const int misfits = p.count("does_not_fit");
    if (misfits > 0)
      s += "; did not fit in " + std::to_string(misfits) + " of " +
           std::to_string(p.repeats.size()) + " repeats";
    return s;
  }
  for (const auto& r : p.repeats) {
    const json* d = find_at(r.j, "/does_not_fit");
    if (r.status != "does_not_fit" || !d || !d->is_object()) continue;
    const auto mib1 = [&](const char* key) {
      const auto v = number_at(*d, (std::string("/") + key).c_str());
      return v ? fixed(*v, 1) : std::string("?");
    };
    return "does not fit: needs ≥ " + mib1("needed_at_least_mib") + " MiB (allocation of " +
           mib1("requested_mib") + " MiB for " + str_or(*d, "allocation", "?") + " with " +
           mib1("in_use_mib") + " MiB in use)";
  }
  return not_ok_text(p);
}

std::string total_text(const Point& p) {
  if (p.total.empty()) return "-";
  std::vector<double> totals;
  for (const auto& t : p.total) totals.push_back(t.second);
  MeanCi m = mean_ci(totals);
  m.mean = median(totals);
  return with_ci(m, 1);
}

std::string md_memory(const Run& run) {
  std::map<std::string, std::optional<double>> profile_fb;
  for (const auto& info : profile_infos(run)) profile_fb[info.name] = info.framebuffer;
  std::vector<std::vector<std::string>> rows;
  for (const Point* p : points_of(run, PointKind::train)) {
    if (p->profile == "none") continue;
    auto fb = framebuffer_of(*p);
    if (!fb) fb = profile_fb[p->profile];
    rows.push_back({p->model + batch_suffix(*p), p->profile, framebuffer_text(fb, p->profile),
                    std::to_string(p->nodes), fit_text(*p, fb), total_text(*p)});
  }
  if (rows.empty()) return "";
  return "### Memory: does the model fit\n\nEvery training point with a profile: the device "
         "memory it peaked at (rank 0, largest over the repeats) against the profile's "
         "framebuffer, or what it needed when it did not fit.\n\n" +
         md_table({"model config", "profile", "framebuffer MiB", "N", "result", "total img/s"},
                  "llrrlr", rows);
}

std::string pct1(const std::optional<double>& fraction) {
  return fraction ? fixed(100 * *fraction, 1) + "%" : "-";
}

// Median over repeats ± CI of a value by repeat.
std::string median_text(const std::map<int, double>& by_repeat, int decimals) {
  std::vector<double> v;
  for (const auto& x : by_repeat) v.push_back(x.second);
  MeanCi m = mean_ci(v);
  m.mean = median(v);
  return with_ci(m, decimals);
}

// The cells of one group (1 VM or k VMs) of a sharing row; `cells` of them.
std::vector<std::string> share_group(const Point* p, bool alone) {
  const size_t n = alone ? 3 : 5;
  std::vector<std::string> cells(n, "");
  if (!p) {
    cells[0] = "not run";
    return cells;
  }
  if (p->total.empty()) {
    cells[0] = not_ok_text(*p);
    return cells;
  }
  const std::string step = p->step_s ? fixed(*p->step_s, 4) : "-";
  const std::string per_vm = p->per_vm.empty() ? "-" : median_text(p->per_vm, 1);
  if (alone) return {per_vm, step, pct1(p->util_per_vm)};
  return {per_vm, median_text(p->total, 1), step, pct1(p->util_per_vm), pct1(p->util_total)};
}

// Per-VM img/s with k VMs over one VM alone, paired by repeat: median ± CI.
std::string share_ratio(const Point* alone, const Point* shared) {
  if (!alone || !shared || alone->per_vm.empty() || shared->per_vm.empty()) return "-";
  const auto ratios = paired(shared->per_vm, alone->per_vm, 1);
  if (ratios.empty()) return "-";
  MeanCi m = mean_ci(ratios);
  m.mean = median(ratios);
  return with_ci(m, 3, "×");
}

std::string slice_text(const std::vector<const Point*>& pts) {
  for (const Point* p : pts)
    for (const auto& r : p->repeats)
      if (auto ms = number_at(r.j, "/slice_ms")) return ", slice " + num6(*ms) + " ms";
  return "";
}

// The sharing tables of one model's (batch, image size).
std::string md_share_config(const std::vector<const Point*>& config) {
  const Point& first = *config.front();
  std::string md = "### Sharing one device: " + first.model + ", batch " +
                   std::to_string(first.batch) + " per VM, " +
                   (first.image_size > 0 ? "image size " + std::to_string(first.image_size)
                                         : "default image size") +
                   "\n\n";
  const auto rows = share_rows(config);
  std::set<int> ks = shared_vms(config);
  if (ks.empty()) ks.insert(0);  // only 1 VM points: one table without the k VMs columns
  for (int k : ks) {
    std::vector<std::vector<std::string>> cells;
    for (const auto& row : rows) {
      const auto at = [&](int vms) {
        const auto it = row.by_vms.find(vms);
        return it == row.by_vms.end() ? nullptr : it->second;
      };
      std::vector<std::string> r = {row.first->profile, row.first->policy};
      for (const auto& c : share_group(at(1), true)) r.push_back(c);
      if (k > 0) {
        for (const auto& c : share_group(at(k), false)) r.push_back(c);
        r.push_back(share_ratio(at(1), at(k)));
      }
      cells.push_back(r);
    }
    std::vector<std::string> head = {"profile", "policy", "1 VM: img/s", "1 VM: step s",
                                     "1 VM: device util"};
    std::string align = "llrrr";
    if (k > 0) {
      const std::string kv = vms_text(k) + ": ";
      for (const char* h : {"img/s per VM", "total img/s", "step s", "device util per VM",
                            "device util total"})
        head.push_back(kv + h);
      head.push_back("per-VM img/s, " + std::to_string(k) + " vs 1");
      align += "rrrrrr";
    }
    md += (k > 0 ? "One VM alone, then " + vms_text(k) + " of the same profile on one device" +
                       slice_text(config) + ".\n\n"
                 : "One VM alone" + slice_text(config) + ".\n\n") +
          md_table(head, align, cells);
  }
  return md;
}

std::string md_vgpu(const Run& run, Plotter& plotter) {
  if (!has_vgpu(run)) return "";
  std::string md = "## vGPU profiles\n\n" + md_profiles(run) + md_memory(run);
  const auto share = points_of(run, PointKind::share);
  if (share.empty()) return md;
  md += "How to read the sharing tables: each VM is an independent training job with the "
        "profile's framebuffer, and the VMs take turns on the one device in time slices. Under "
        "**best effort** an idle VM yields its slice, so a VM alone has the whole device: look at "
        "how much of its alone img/s each VM keeps with k VMs and whether the device total "
        "utilization rises toward 100% (sharing then costs little beyond the split itself). "
        "Under **equal share** each powered-on VM gets 1/(VMs on) of the time. Under **fixed "
        "share** each VM gets 1/(vGPUs per GPU) whether the others run or not: a VM alone is "
        "capped too, so look for per-VM img/s that barely changes from 1 to k VMs (isolation) "
        "and for the device utilization it leaves unused (the price of that isolation). A "
        "\"k vs 1\" near 1.0 means a neighbour costs a VM nothing; near 1/k means the VMs split "
        "the device.\n\n";
  for (size_t i = 0; i < share.size();) {
    std::vector<const Point*> model;
    for (const std::string& m = share[i]->model; i < share.size() && share[i]->model == m; ++i)
      model.push_back(share[i]);
    for (size_t j = 0; j < model.size();) {
      std::vector<const Point*> config;
      for (const Point* f = model[j]; j < model.size() && model[j]->batch == f->batch &&
                                      model[j]->image_size == f->image_size;
           ++j)
        config.push_back(model[j]);
      md += md_share_config(config);
    }
    if (plotter.enabled())
      for (const auto& name : share_plots(model, plotter))
        md += image(name.substr(file_safe(model.front()->model).size() + 1) + " of " +
                        model.front()->model,
                    name);
  }
  return md;
}

std::vector<std::string> size_row(uint64_t bytes, const SizeStats& s) {
  std::string algos;
  for (const auto& a : s.algos) algos += (algos.empty() ? "" : "/") + a;
  return {fmt_bytes(bytes), algos, s.time_us.empty() ? "-" : fixed(median(s.time_us), 1),
          s.busbw.empty() ? "-" : fixed(median(s.busbw), 3),
          s.checked ? std::to_string(s.wrong) : "not checked"};
}

std::string md_collectives(const Run& run, Plotter& plotter) {
  const auto coll = points_of(run, PointKind::collectives);
  if (coll.empty()) return "";
  std::string md = "## Collectives (allreduce)\n\nOut-of-place rows, median over the ok repeats; "
                   "#wrong summed over them (any wrong element fails the run: see the top).\n\n";
  for (const Point* p : coll) {
    md += "### N=" + std::to_string(p->nodes) + ", " + p->transport +
          (p->profile != "none" ? ", " + p->profile : "") + " (" + p->id + ")\n\n";
    if (p->sizes.empty()) {
      md += "No results: the point " + p->status() + ".\n\n";
      continue;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& [bytes, s] : p->sizes) rows.push_back(size_row(bytes, s));
    md += md_table({"size", "algo", "time us", "busbw GB/s", "#wrong"}, "rlrrr", rows);
  }
  if (plotter.enabled() && busbw_plot(run, plotter))
    md += image("allreduce busbw vs message size", "busbw");
  return md;
}

// "transport=tcp addr=10.77.0.1:41234 iface=eth0 link_gbps=1": the transport first.
std::string path_text(const json& path) {
  if (!path.is_object()) return path.dump();
  const auto value = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  std::string s = path.contains("transport") ? "transport=" + value(path["transport"]) : "";
  for (const auto& [k, v] : path.items())
    if (k != "transport") s += (s.empty() ? "" : " ") + k + "=" + value(v);
  return s;
}

std::string md_paths(const Run& run) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : run.points) {
    if (p.kind == PointKind::share) {  // k single-rank jobs on one device: nothing crosses a network
      rows.push_back(
          {p.id, "n/a", "n/a (" + vms_text(p.vms) + " sharing one device, no transport)"});
      continue;
    }
    std::vector<std::string> row = {p.id, "-", p.status() == "does_not_fit"
                                                   ? "n/a (does not fit the profile's framebuffer)"
                                                   : "n/a (no repeat ran)"};
    for (const auto& r : p.repeats) {
      const json* s = section(r);
      const json* hosts = s ? find_at(*s, "/meta/hosts") : nullptr;
      if (!hosts || !hosts->is_array() || hosts->empty()) continue;
      const json& rank0 = (*hosts)[0];
      row = {p.id, host_of(r, 0), path_text(rank0.is_object() ? rank0.value("path", json()) : json())};
      break;
    }
    rows.push_back(row);
  }
  return "## Transport path actually used\n\nRank 0's path as the transport reported it "
         "(meta.hosts[0].path of the first repeat that ran).\n\n" +
         md_table({"point", "rank 0 host", "path"}, "lll", rows);
}

std::string md_failures(const Run& run) {
  std::string md = "## Failed and skipped points\n\n", misfits;
  size_t n = 0;
  for (const auto& p : run.points)
    for (const auto& r : p.repeats) {
      const std::string item = "- `" + p.id + "` repeat " + std::to_string(r.repeat) + ": ";
      const std::string error = r.error.empty() ? "(no error recorded)" : one_line(r.error);
      if (r.status == "does_not_fit") {
        misfits += item + error + "\n";
      } else if (r.status != "ok") {
        md += item + r.status + ": " + error + "\n";
        ++n;
      }
    }
  md += n ? "\n" : "None.\n";
  if (misfits.empty()) return md;
  return md + (n ? "" : "\n") +
         "Did not fit the profile's framebuffer (results, not failures: the model and batch need "
         "more device memory than the profile gives):\n\n" + misfits;
}

// ---------------------------------------------------------------------------------------------
// compare

struct Measure {
  std::string metric;
  std::optional<double> value;  // none: the point has no result
  double noise = 0;             // CI95 / median
};

Measure relative(const std::string& metric, const std::vector<double>& v) {
  if (v.empty()) return {metric, std::nullopt, 0};
  const double m = median(v);
  return {metric, m, v.size() >= 2 && m > 0 ? mean_ci(v).ci95 / m : 0};
}

// Train and share: median total img/s (share: summed over the VMs). Collectives: median busbw
// at `bytes`.
Measure measure(const Point& p, std::optional<uint64_t> bytes) {
  if (p.kind == PointKind::train || p.kind == PointKind::share) {
    std::vector<double> v;
    for (const auto& t : p.total) v.push_back(t.second);
    return relative("total img/s", v);
  }
  if (!bytes) return {"busbw GB/s", std::nullopt, 0};
  return relative("busbw GB/s @" + fmt_bytes(*bytes), p.sizes.at(*bytes).busbw);
}

// The largest size with busbw in both runs.
std::optional<uint64_t> common_size(const Point& a, const Point& b) {
  for (auto it = a.sizes.rbegin(); it != a.sizes.rend(); ++it) {
    const auto other = b.sizes.find(it->first);
    if (!it->second.busbw.empty() && other != b.sizes.end() && !other->second.busbw.empty())
      return it->first;
  }
  return std::nullopt;
}

struct Verdict {
  std::string point, metric, a, b, delta, noise, verdict;
  bool broke = false;  // a result in A, none in B
};

Verdict judge(const Point* a, const Point* b, const CompareOptions& opts) {
  if (!b) return {a->id, "", "", "", "", "", "only in A"};
  if (!a) return {b->id, "", "", "", "", "", "only in B"};
  const auto bytes = a->kind == PointKind::collectives ? common_size(*a, *b) : std::nullopt;
  if (a->kind == PointKind::collectives && !bytes && !a->sizes.empty() && !b->sizes.empty())
    return {a->id, "busbw GB/s", "", "", "", "", "no common size"};
  const Measure ma = measure(*a, bytes), mb = measure(*b, bytes);
  const int decimals = a->kind == PointKind::collectives ? 3 : 1;
  const bool skipped = a->status() == "skipped" && b->status() == "skipped";
  // Not fitting the profile's framebuffer is a result of B, not a regression.
  const bool misfit = !mb.value && b->status() == "does_not_fit";
  const auto shown = [](const Point& p) {
    return p.status() == "does_not_fit" ? std::string("does not fit") : p.status();
  };
  Verdict v{a->id, ma.metric, ma.value ? fixed(*ma.value, decimals) : shown(*a),
            mb.value ? fixed(*mb.value, decimals) : shown(*b), "", "",
            skipped ? "skipped" : misfit || (!ma.value && a->status() == "does_not_fit")
                                      ? "does not fit"
                                      : "failed",
            ma.value && !mb.value && !misfit};
  if (!ma.value || !mb.value || *ma.value <= 0) return v;
  const double delta = *mb.value / *ma.value - 1, noise = std::max(ma.noise, mb.noise);
  const double bar = std::max(opts.threshold, noise);
  v.delta = (delta >= 0 ? "+" : "") + fixed(100 * delta, 1);
  v.noise = fixed(100 * noise, 1);
  v.verdict = delta < -bar ? "REGRESSION" : delta > bar ? "faster" : "ok";
  return v;
}

void print_verdicts(const std::vector<Verdict>& rows) {
  size_t wp = 5, wm = 6, wv = 10;
  for (const auto& r : rows) {
    wp = std::max(wp, r.point.size());
    wm = std::max(wm, r.metric.size());
    wv = std::max({wv, r.a.size(), r.b.size()});
  }
  const auto line = [&](const Verdict& r) {
    std::printf("%-*s  %-*s  %*s  %*s  %8s  %8s  %s\n", int(wp), r.point.c_str(), int(wm),
                r.metric.c_str(), int(wv), r.a.c_str(), int(wv), r.b.c_str(), r.delta.c_str(),
                r.noise.c_str(), r.verdict.c_str());
  };
  line({"point", "metric", "A", "B", "delta %", "noise %", "verdict"});
  for (const auto& r : rows) line(r);
}

}  // namespace

void write_report(const std::string& run_dir, const ReportOptions& opts) {
  const Run run = load_run(run_dir, opts.straggler_margin);
  Plotter plotter(run_dir, opts.plots);
  const std::string md = md_header(run, plotter) + md_definitions(opts, run) +
                         md_train(run, plotter) + md_time(run, plotter) + md_stragglers(run, opts) +
                         md_vgpu(run, plotter) + md_collectives(run, plotter) + md_paths(run) +
                         md_failures(run);
  write_file_atomic(run_dir + "/summary.csv", summary_csv(run));
  write_file_atomic(run_dir + "/report.md", md);
}

int compare_runs(const std::string& run_a, const std::string& run_b, const CompareOptions& opts) {
  const Run a = load_run(run_a, ReportOptions{}.straggler_margin);
  const Run b = load_run(run_b, ReportOptions{}.straggler_margin);
  std::map<std::string, std::pair<const Point*, const Point*>> matched;
  for (const auto& p : a.points) matched[p.id].first = &p;
  for (const auto& p : b.points) matched[p.id].second = &p;
  std::vector<std::pair<const Point*, const Point*>> pairs;
  for (const auto& m : matched) pairs.push_back(m.second);
  const auto key = [](const std::pair<const Point*, const Point*>& m) {
    return order_key(m.first ? *m.first : *m.second);
  };
  std::sort(pairs.begin(), pairs.end(),
            [&](const auto& x, const auto& y) { return key(x) < key(y); });

  std::printf("A: %s (sweep %s, run %s)\nB: %s (sweep %s, run %s)\n", run_a.c_str(),
              a.sweep.c_str(), a.run_id.c_str(), run_b.c_str(), b.sweep.c_str(), b.run_id.c_str());
  std::printf("A regression: B worse than A by more than the threshold (%s%%) and the noise "
              "(the larger relative 95%% CI of the two runs).\n\n",
              fixed(100 * opts.threshold, 1).c_str());
  std::vector<Verdict> rows;
  std::map<std::string, int> counts;
  int broke = 0;
  for (const auto& [pa, pb] : pairs) {
    rows.push_back(judge(pa, pb, opts));
    ++counts[rows.back().verdict];
    broke += rows.back().broke;
  }
  print_verdicts(rows);
  const int regressions = counts["REGRESSION"];
  const std::string misfits =  // only where a point did not fit: other runs read as before
      counts["does not fit"] ? ", " + std::to_string(counts["does not fit"]) + " does not fit" : "";
  std::printf("\n%d regression%s beyond noise, %d faster, %d ok, %d failed%s, %d skipped, "
              "%d only in A, %d only in B\n",
              regressions, regressions == 1 ? "" : "s", counts["faster"], counts["ok"],
              counts["failed"], misfits.c_str(), counts["skipped"], counts["only in A"],
              counts["only in B"]);
  if (broke)
    std::printf("%d point%s with a result in A failed in B: --fail-on-regression counts %s as "
                "regressions\n",
                broke, broke == 1 ? "" : "s", broke == 1 ? "it" : "them");
  std::fflush(stdout);
  return opts.fail_on_regression && regressions + broke > 0 ? 1 : 0;
}

}  // namespace ringbench
