// The points of a run, their statistics over repeats and across points, their order and names.
#include "runner/analysis/run.h"

#include <limits>

#include "runner/backends/backend.h"
#include "runner/analysis/format.h"
#include "runner/record/json_fields.h"

namespace ringbench::report {
namespace {

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
  p.cpus_busy = mean_over(ok, "/train/summary/cpus_busy_per_rank");
  p.input_stall_s = mean_over(ok, "/train/input/stall_s_per_step/mean_over_ranks");
  p.input_cpus = mean_over(ok, "/train/input/pipeline_cpus_per_rank");
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

// Offline samples/s at the largest batch each ok repeat ran (md_infer.cc reads the rest); with
// VMs, summed over them (per_vm: their mean), and the device's utilization.
void infer_stats(Point& p) {
  if (p.shared()) {
    for (const Record* r : p.ok()) {
      if (auto x = number_at(r->j, "/infer/summary/offline/total_samples_per_s")) p.total[r->repeat] = *x;
      if (auto x = number_at(r->j, "/infer/summary/offline/per_vm/mean")) p.per_vm[r->repeat] = *x;
      if (const json* vms = find_at(r->j, "/infer/vms"); vms && vms->is_array())
        for (const auto& vm : *vms) p.memory_peak_mib = larger(p.memory_peak_mib, number_at(vm, "/device/memory_mib"));
    }
    p.util_per_vm = mean_over(p.ok(), "/infer/summary/device_util_per_vm");
    p.util_total = mean_over(p.ok(), "/infer/summary/device_util_total");
    return;
  }
  for (const Record* r : p.ok()) {
    p.memory_peak_mib = larger(p.memory_peak_mib, number_at(r->j, "/infer/device/memory_mib"));
    const json* offline = find_at(r->j, "/infer/offline");
    if (!offline || !offline->is_array()) continue;
    int largest = 0;
    for (const auto& row : *offline) {
      const auto sps = number_at(row, "/samples_per_s");
      if (sps && int_or(row, "batch", 0) >= largest) {
        largest = int_or(row, "batch", 0);
        p.total[r->repeat] = *sps;
      }
    }
  }
}

// The job's total img/s and step time, as a train point's (md_migrate.cc reads the migration).
void migrate_stats(Point& p) {
  for (const Record* r : p.ok())
    if (auto x = number_at(r->j, "/migrate/summary/total_img_s/mean")) p.total[r->repeat] = *x;
  p.step_s = mean_over(p.ok(), "/migrate/summary/step_s/mean_over_ranks");
}

// The clients' total img/s and their mean step time (md_remote.cc reads the traffic).
void remote_stats(Point& p) {
  for (const Record* r : p.ok())
    if (auto x = number_at(r->j, "/remote/summary/total_img_s/mean")) p.total[r->repeat] = *x;
  p.step_s = mean_over(p.ok(), "/remote/summary/step_s");
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
      if (auto c = number_at(row, "/cpu_us"); c && std::isfinite(*c) && *c >= 0) s.cpu_us.push_back(*c);
      s.wrong += wrong;
      s.checked = s.checked || checked;
    }
  }
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

}  // namespace

bool same_axes_but_communication(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (size_t i = 0; i < sweep_axes().size(); ++i)
    if (!sweep_axes()[i].communication && a[i] != b[i]) return false;
  return true;
}

std::vector<std::tuple<bool, double, std::string>> axes_order(const std::vector<std::string>& values) {
  std::vector<std::tuple<bool, double, std::string>> key;
  for (size_t i = 0; i < sweep_axes().size(); ++i) {
    const auto [number, text] = axis_sort_key(sweep_axes()[i], values[i]);
    key.emplace_back(values[i] != sweep_axes()[i].default_value, number, text);
  }
  return key;
}

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
    if ((nodes == 1 ? o.same_config_but_wire(p) : o.same_config(p)) && o.nodes == nodes && o.transport == transport)
      return &o;
  return nullptr;
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
    else if (p.kind == PointKind::infer) infer_stats(p);
    else if (p.kind == PointKind::migrate) migrate_stats(p);
    else if (p.kind == PointKind::remote) remote_stats(p);
    else collectives_stats(p);
  }
  std::sort(run.started.begin(), run.started.end());
  cross_point_stats(run.points);
  return run;
}

std::string axes_label(const Point& p, const std::string& separator, bool flags) {
  std::string s;
  for (size_t i : axes_of(p.kind)) {
    const Axis& a = sweep_axes()[i];
    if (p.axes[i] == a.default_value) continue;
    s += separator + (a.label.empty() ? p.axes[i] : axis_value_label(a, p.axes[i], flags));
  }
  return s;
}

std::string batch_suffix(const Point& p) {
  return " b" + std::to_string(p.batch) +
         (p.image_size > 0 ? " " + std::to_string(p.image_size) + "px" : "") + axes_label(p, " ", false);
}

std::string config_suffix(const Point& p, bool with_config) {
  std::string s = with_config ? batch_suffix(p) : "";
  if (p.profile != "none") s += " " + p.profile;
  return s;
}

std::string label(const Point& p, bool with_config) {
  return p.model + " n" + std::to_string(p.nodes) + " " + p.transport +
         config_suffix(p, with_config);
}

std::string not_ok_text(const Point& p) {
  const std::string s = p.status();
  return s == "skipped" ? "skipped" : s == "does_not_fit" ? "does not fit" : "failed";
}

std::string vms_text(int vms) { return std::to_string(vms) + (vms == 1 ? " VM" : " VMs"); }

std::set<std::string> multi_config_models(const Run& run) {
  std::map<std::string, std::set<std::tuple<int, int, std::vector<std::string>>>> configs;
  for (const auto& p : run.points)
    if (p.kind == PointKind::train) configs[p.model].insert({p.batch, p.image_size, p.axes});
  std::set<std::string> out;
  for (const auto& [model, c] : configs)
    if (c.size() > 1) out.insert(model);
  return out;
}

int ranks_per_node(const Run& run) {
  const json& c = run.cluster;
  if (!c.is_object() || !c.contains("ranks_per_node") || !c["ranks_per_node"].is_number_integer()) return 1;
  return std::max(1, c["ranks_per_node"].get<int>());
}

std::vector<const Point*> points_of(const Run& run, PointKind kind) {
  std::vector<const Point*> v;
  for (const auto& p : run.points)
    if (p.kind == kind) v.push_back(&p);
  return v;
}

bool has_share(const Run& run) { return !points_of(run, PointKind::share).empty(); }

bool has_vgpu(const Run& run) {
  return std::any_of(run.points.begin(), run.points.end(), [](const Point& p) {
    return p.profile != "none" || p.kind == PointKind::share;
  });
}

const json* vgpu_of(const Record& r) {
  const auto it = r.j.find("vgpu");
  if (it != r.j.end() && it->is_object()) return &*it;
  const json* s = section(r);
  const json* v = s ? find_at(*s, "/meta/vgpu") : nullptr;
  return v && v->is_object() ? v : nullptr;
}

const json* vgpu_of(const Point& p) {
  for (const auto& r : p.repeats)
    if (const json* v = vgpu_of(r)) return v;
  return nullptr;
}

std::optional<double> framebuffer_of(const Record& r) {
  for (const char* at : {"/share/meta/framebuffer_mib", "/train/summary/device_memory/cap_mib",
                         "/does_not_fit/framebuffer_mib", "/vgpu/framebuffer_mib",
                         "/train/meta/vgpu/framebuffer_mib", "/train/meta/vgpu/profile_framebuffer_mib",
                         "/vgpu/profile_framebuffer_mib", "/infer/meta/framebuffer_mib",
                         "/infer/meta/vgpu/framebuffer_mib", "/infer/meta/vgpu/profile_framebuffer_mib",
                         "/migrate/meta/vgpu/framebuffer_mib", "/migrate/meta/vgpu/profile_framebuffer_mib"})
    if (auto v = number_at(r.j, at)) return v;
  return std::nullopt;
}

std::optional<double> framebuffer_of(const Point& p) {
  for (const auto& r : p.repeats)
    if (auto v = framebuffer_of(r)) return v;
  return std::nullopt;
}

std::vector<ShareRow> share_rows(const std::vector<const Point*>& pts) {
  std::vector<ShareRow> rows;
  for (const Point* p : pts) {
    const Point* last = rows.empty() ? nullptr : rows.back().first;
    if (!last || !last->same_config(*p) || last->policy != p->policy) rows.push_back({p, {}});
    rows.back().by_vms[p->vms] = p;
  }
  return rows;
}

std::set<int> shared_vms(const std::vector<const Point*>& pts) {
  std::set<int> ks;
  for (const Point* p : pts)
    if (p->vms > 1) ks.insert(p->vms);
  return ks;
}

}  // namespace ringbench::report
