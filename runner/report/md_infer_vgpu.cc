// report.md's Inference section, its vGPU part: every model served under each profile alone,
// and k VMs serving at once on one time-sliced device under each scheduler policy
// (`ringbench vgpu share -- infer`): the QPS at the p99 bound per VM, for each VM and in total,
// the device's utilization, Offline samples/s per VM, and a bar chart per model.
#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "runner/infer/server_json.h"
#include "runner/analysis/format.h"
#include "runner/report/infer_views.h"
#include "runner/report/md_groups.h"
#include "runner/report/sections.h"

namespace ringbench::report {
namespace {

double mean_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); }
double sum_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// One point's figures over its ok repeats: per repeat the VMs' mean and sum, and per VM (by its
// index) its own values.
struct Serving {
  std::vector<double> qps_per_vm, qps_total, p99_s, util_per_vm, util_total;
  std::map<int, std::vector<double>> qps_of_vm, p99_of_vm;  // p99 in ms
  std::map<int, std::vector<double>> ss_p50_of_vm, ss_p90_of_vm, ss_p99_of_vm;  // SingleStream, ms
  int not_met = 0;  // repeats in which a VM met the bound at no rate
  int offline_batch = 0;
  std::vector<double> offline_per_vm, offline_total;
  std::map<int, std::vector<double>> offline_of_vm;
  Validity validity;  // of the runs at the QPS found
};

// One VM's Server figures into `s` (its QPS into `qps`); false when it met the bound at no rate.
bool add_server(Serving& s, const json& vm, int index, std::vector<double>& qps, std::vector<double>& p99) {
  const json* server = find_at(vm, "/server");
  if (!server) return true;
  if (const json* run = infer::server_headline_run(*server)) {
    if (auto t = number_at(*run, "/tail_latency_s")) {
      p99.push_back(*t);
      s.p99_of_vm[index].push_back(*t * 1e3);
    }
    s.validity.add(*run);
  }
  const auto q = infer::qps_at_bound(*server);
  if (!q) return false;
  qps.push_back(*q);
  s.qps_of_vm[index].push_back(*q);
  return true;
}

void add_repeat(Serving& s, const Record& r) {
  std::vector<double> qps, p99, offline, util;
  bool met = true;
  const auto vms = served_vms(r);
  for (size_t i = 0; i < vms.size(); ++i) {
    const json& vm = *vms[i];
    met = add_server(s, vm, int(i), qps, p99) && met;
    if (const json* o = infer::largest_offline_run(vm)) {
      s.offline_batch = std::max(s.offline_batch, int_or(*o, "batch", 0));
      if (auto x = number_at(*o, "/samples_per_s")) {
        offline.push_back(*x);
        s.offline_of_vm[int(i)].push_back(*x);
      }
    }
    if (auto u = number_at(vm, "/device/utilization")) util.push_back(*u);
    const std::pair<const char*, std::map<int, std::vector<double>>*> ss[] = {
        {"/single_stream/latency/p50_s", &s.ss_p50_of_vm}, {"/single_stream/latency/p90_s", &s.ss_p90_of_vm},
        {"/single_stream/latency/p99_s", &s.ss_p99_of_vm}};
    for (const auto& [at, into] : ss)
      if (auto x = number_at(vm, at)) (*into)[int(i)].push_back(*x * 1e3);
  }
  if (!met) ++s.not_met;
  if (met && !qps.empty()) {
    s.qps_per_vm.push_back(mean_of(qps));
    s.qps_total.push_back(sum_of(qps));
  }
  if (!p99.empty()) s.p99_s.push_back(mean_of(p99));
  if (!offline.empty()) {
    s.offline_per_vm.push_back(mean_of(offline));
    s.offline_total.push_back(sum_of(offline));
  }
  if (!util.empty()) s.util_per_vm.push_back(mean_of(util));
  if (auto u = number_at(r.j, "/infer/summary/device_util_total")) s.util_total.push_back(*u);
}

Serving serving(const Point& p) {
  Serving s;
  for (const Record* r : p.ok()) add_repeat(s, *r);
  return s;
}

std::string med(const std::vector<double>& v, int decimals, double scale = 1) {
  return v.empty() ? "-" : fixed(median(v) * scale, decimals);
}

// "95.0 / 97.5": each VM's median, in VM order ("-" for one VM).
std::string each_vm(const std::map<int, std::vector<double>>& by_vm) {
  if (by_vm.size() < 2) return "-";
  std::string s;
  for (const auto& [vm, v] : by_vm) s += (s.empty() ? "" : " / ") + med(v, 1);
  return s;
}

// The median of every VM's values pooled ("-" without any).
std::string pooled(const std::map<int, std::vector<double>>& by_vm, int decimals) {
  std::vector<double> all;
  for (const auto& [vm, v] : by_vm) all.insert(all.end(), v.begin(), v.end());
  return med(all, decimals);
}

// The row's first columns: model and its sizes, profile, scheduler, VMs.
std::vector<std::string> row_head(const Point& p) {
  return {p.model + batch_suffix(p), p.profile, p.shared() ? p.policy : "none (alone)",
          std::to_string(p.shared() ? p.vms : 1)};
}

std::vector<std::string> qps_row(const Point& p) {
  std::vector<std::string> row = row_head(p);
  if (p.ok().empty()) {
    for (const auto& c : std::vector<std::string>{not_ok_text(p), "-", "-", "-", "-", "-", "-"}) row.push_back(c);
    return row;
  }
  const Serving s = serving(p);
  std::string qps = s.qps_per_vm.empty() && s.not_met ? "none met the bound" : med(s.qps_per_vm, 1);
  if (s.not_met && !s.qps_per_vm.empty())
    qps += " (" + std::to_string(s.qps_per_vm.size()) + " of " + std::to_string(p.ok().size()) + " repeats)";
  std::string p99 = med(s.p99_s, 2, 1e3);
  if (s.p99_of_vm.size() > 1) p99 += " (" + each_vm(s.p99_of_vm) + ")";
  for (const auto& c : std::vector<std::string>{qps, each_vm(s.qps_of_vm), med(s.qps_total, 1), p99,
                        s.util_per_vm.empty() ? "-" : percent(median(s.util_per_vm)),
                        s.util_total.empty() ? "-" : percent(median(s.util_total)),
                        s.p99_s.empty() ? "-" : s.validity.text()})
    row.push_back(c);
  return row;
}

// SingleStream's percentiles over every VM's runs, and each VM's p99.
std::vector<std::string> single_stream_row(const Point& p) {
  std::vector<std::string> row = row_head(p);
  const Serving s = serving(p);
  for (const auto& c : std::vector<std::string>{pooled(s.ss_p50_of_vm, 2), pooled(s.ss_p90_of_vm, 2),
                                                pooled(s.ss_p99_of_vm, 2), each_vm(s.ss_p99_of_vm)})
    row.push_back(c);
  return row;
}

std::vector<std::string> offline_row(const Point& p) {
  std::vector<std::string> row = row_head(p);
  const Serving s = serving(p);
  for (const auto& c : std::vector<std::string>{s.offline_batch ? std::to_string(s.offline_batch) : "-", med(s.offline_per_vm, 1),
                        each_vm(s.offline_of_vm), med(s.offline_total, 1)})
    row.push_back(c);
  return row;
}

// The infer points in the tables' order: by model and sizes, profile (none first, then the
// sweep's order), alone before shared, then policy and VMs.
std::vector<const Point*> table_order(std::vector<const Point*> pts) {
  std::stable_sort(pts.begin(), pts.end(), [](const Point* a, const Point* b) {
    const auto key = [](const Point* p) {
      return std::tuple(p->model, p->batch, p->image_size, p->profile_order, p->profile, p->shared(),
                        policy_rank(p->policy), p->policy, p->vms);
    };
    return key(a) < key(b);
  });
  return pts;
}

Pair qps_value(const Point& p, bool total) {
  const Serving s = serving(p);
  const auto& v = total ? s.qps_total : s.qps_per_vm;
  if (v.empty()) return std::nullopt;
  return std::array<double, 2>{median(v), mean_ci(v).ci95};
}

std::string qps_plots(const std::vector<const Point*>& shared, Plotter& plotter) {
  std::string md;
  if (!plotter.enabled()) return md;
  for (const auto& model : by_model(shared)) {
    const std::string m = model.front()->model;
    const ShareValue per_vm = [](const Point& p) { return qps_value(p, false); };
    const ShareValue total = [](const Point& p) { return qps_value(p, true); };
    const std::string name = share_bar_chart(
        model, "infer-share-qps", m + ": QPS at the p99 bound per VM, 1 VM alone and k VMs (median, 95% CI)",
        "QPS at the p99 bound", {{true, "per VM", per_vm}, {false, "per VM", per_vm}, {false, "total", total}},
        "[0:*]", plotter);
    if (!name.empty()) md += image(m + ": QPS at the p99 bound per VM by profile and policy", name);
  }
  return md;
}

const char* kIntro =
    "### QPS at the p99 bound per profile and policy\n\n"
    "Each model served under each vGPU profile: alone (one `ringbench infer`, no scheduler: the "
    "profile's framebuffer caps its memory), and as 1 VM or k VMs of the profile time-sliced on one "
    "device by ringbench's scheduler under each policy (`ringbench vgpu share -- infer`: every batch's "
    "forward pass holds the device, and the VMs start measuring together). Each VM runs the scenarios "
    "itself (Offline at its largest batch only); the Server search finds each VM's highest QPS whose p99 meets the bound while the other "
    "VMs search theirs, and a VM that is done keeps serving at its peak until all are. **QPS at the "
    "bound per VM**: the VMs' mean (median over repeats); **each VM**: each one's median; **total**: "
    "their sum (a repeat in which some VM met the bound at no rate has none); **p99 ms**: at the QPS "
    "found, mean over VMs (each VM's in brackets); **device util**: the time a VM held the device over its measured runs, "
    "and the time any VM held it over the window in which they measured.\n\n";

}  // namespace

std::string md_infer_vgpu(const Run& run, Plotter& plotter) {
  const auto all = points_of(run, PointKind::infer);
  const bool any = std::any_of(all.begin(), all.end(), [](const Point* p) { return p->shared() || p->profile != "none"; });
  if (!any) return "";
  const auto pts = table_order(all);
  std::vector<std::vector<std::string>> qps, offline, single;
  std::vector<const Point*> shared;
  for (const Point* p : pts) {
    qps.push_back(qps_row(*p));
    if (!p->shared()) continue;
    shared.push_back(p);
    const Serving s = serving(*p);
    if (!s.offline_per_vm.empty()) offline.push_back(offline_row(*p));
    if (!s.ss_p99_of_vm.empty()) single.push_back(single_stream_row(*p));
  }
  std::string md = kIntro + md_table({"model", "profile", "scheduler", "VMs", "QPS at the bound per VM", "each VM",
                                      "total QPS", "p99 ms", "device util per VM", "device total", "LoadGen"},
                                     "lllrrlrrrrl", qps);
  if (!offline.empty())
    md += "Offline samples/s per VM, each VM at its largest batch while the others run theirs:\n\n" +
          md_table({"model", "profile", "scheduler", "VMs", "batch", "samples/s per VM", "each VM", "total"},
                   "lllrrrlr", offline);
  if (!single.empty())
    md += "SingleStream latency per VM, one query at a time on each VM while the others run theirs (ms; "
          "percentiles of the VMs' runs pooled, median over repeats and VMs):\n\n" +
          md_table({"model", "profile", "scheduler", "VMs", "p50", "p90", "p99", "each VM's p99"}, "lllrrrrl", single);
  std::sort(shared.begin(), shared.end(), [](const Point* a, const Point* b) { return order_key(*a) < order_key(*b); });
  return md + qps_plots(shared, plotter);
}

}  // namespace ringbench::report
