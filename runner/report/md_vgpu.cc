// report.md's vGPU profiles section: how each profile ran here, whether the models fit, and
// k VMs sharing one device.
#include "runner/report/sections.h"

#include <algorithm>
#include <map>
#include <set>

#include "runner/analysis/format.h"
#include "runner/report/md_groups.h"
#include "runner/record/json_fields.h"

namespace ringbench::report {
namespace {

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

// What the VMs of the run's shared points are: training jobs, and inference jobs where infer
// points shared a device.
std::string jobs_text(const Run& run) {
  for (const Point* p : points_of(run, PointKind::infer))
    if (p->shared()) return has_share(run) ? "training or inference job" : "inference job";
  return "training job";
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
      "ringbench's own scheduler, each an independent " + jobs_text(run) + ": these numbers show what the "
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

}  // namespace

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
  for (const auto& model : by_model(share)) {
    for (const auto& config : by_config(model)) md += md_share_config(config);
    if (plotter.enabled())
      for (const auto& name : share_plots(model, plotter))
        md += image(name.substr(file_safe(model.front()->model).size() + 1) + " of " +
                        model.front()->model,
                    name);
  }
  return md;
}

}  // namespace ringbench::report
