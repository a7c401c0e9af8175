#include "runner/cli/vgpu_cmd.h"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/errors.h"
#include "base/device_memory.h"
#include "runner/job/launcher.h"
#include "runner/job/metadata.h"
#include "vgpu/catalog.h"
#include "vgpu/detect.h"
#include "vgpu/scheduler.h"
#include "runner/cli/share_infer.h"

namespace ringbench {

using json = nlohmann::json;  // not in the anonymous namespace: clang -Wshadow, unity batches

namespace {
namespace fs = std::filesystem;
using Millis = std::chrono::milliseconds;

// The catalog named on the command line, or the built-in one (kept alive for the process).
const vgpu::Catalog& catalog(const std::string& path) {
  if (path.empty()) return vgpu::Catalog::builtin();
  static std::vector<std::unique_ptr<vgpu::Catalog>> loaded;
  try {
    loaded.push_back(std::make_unique<vgpu::Catalog>(vgpu::Catalog::load(path)));
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
  return *loaded.back();
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::atomic<bool> g_share_stop{false};
void on_share_signal(int) { g_share_stop = true; }

}  // namespace

json VgpuSetup::to_json() const {
  return {{"profile", profile}, {"mode", mode}, {"message", message},
          {"framebuffer_mib", framebuffer_mib ? json(framebuffer_mib) : json(nullptr)},
          {"profile_framebuffer_mib", profile_framebuffer_mib ? json(profile_framebuffer_mib) : json(nullptr)},
          {"gpu", gpu}, {"max_instances", max_instances}, {"time_sliced", gate != nullptr},
          {"detected", detection}};
}

VgpuSetup setup_vgpu(const VgpuTrainArgs& a, const std::string& backend, double timeout_s) {
  VgpuSetup s;
  const vgpu::Catalog& cat = catalog(a.catalog);
  const vgpu::Detection d = vgpu::detect_gpus(cat);
  s.detection = vgpu::to_json(d);
  if (a.profile != "none") {
    const vgpu::Profile* p = cat.find(a.profile);
    if (!p) throw Error("--profile: " + cat.unknown_profile_message(a.profile));
    s.profile = p->name;
    s.max_instances = p->max_instances;
    s.gpu = p->gpu;
    s.profile_framebuffer_mib = p->framebuffer_mib;
    const vgpu::ProfileMatch m = vgpu::match_profile(p->name, d, cat);
    s.mode = m.mode;
    s.message = m.message;
    if (m.mode == "mismatch" && !a.allow_mismatch) throw Error(m.message);
    if (m.mode == "real" && backend != "cuda") {
      // The profile is this machine's, but training does not run on its GPU.
      s.mode = "emulated";
      s.message = "this machine's GPU is " + p->name + ", but the " + backend +
                  " backend computes on the CPU: the profile's framebuffer is emulated there";
    }
    if (s.mode != "real" && p->framebuffer_mib > 0) {
      s.framebuffer_mib = p->framebuffer_mib;
      DeviceMemory::instance().set_cap(size_t(p->framebuffer_mib) << 20);
    }
  }
  if (!a.scheduler.empty()) {
    try {
      s.gate = vgpu::connect_gate(a.scheduler, Millis(static_cast<long>(timeout_s * 1000)));
    } catch (const std::exception& e) {
      throw Error(e.what());
    }
  }
  return s;
}

DeviceWindow device_window(const std::vector<std::array<int64_t, 2>>& windows, const vgpu::SliceScheduler& s) {
  int64_t from_ns = INT64_MAX, to_ns = 0;
  for (const auto& [b, e] : windows) {
    from_ns = std::min(from_ns, b);
    to_ns = std::max(to_ns, e);
  }
  DeviceWindow w;
  if (to_ns > from_ns) {
    const vgpu::Clock::time_point from{std::chrono::nanoseconds(from_ns)}, to{std::chrono::nanoseconds(to_ns)};
    w.seconds = double(to_ns - from_ns) / 1e9;
    w.utilization = s.busy_seconds(from, to) / w.seconds;
  }
  return w;
}

std::string DeviceWindow::text() const {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f", seconds);
  return "device utilization " +
         (utilization.is_null() ? std::string("unknown")
                                : std::to_string(int(std::lround(100 * utilization.get<double>()))) + "%") +
         " over the " + s + " s the VMs ran together";
}

json does_not_fit_json(const DeviceOutOfMemory& e, const std::string& profile) {
  const double mib = 1 << 20;
  return {{"profile", profile}, {"framebuffer_mib", double(e.cap) / mib}, {"requested_mib", double(e.requested) / mib},
          {"in_use_mib", double(e.in_use) / mib}, {"needed_at_least_mib", double(e.in_use + e.requested) / mib},
          {"allocation", e.what_for}, {"message", e.what()}};
}

namespace {

int run_profiles(const vgpu::Catalog& cat) {
  std::printf("# vGPU profile catalog (%s)\n", cat.origin().c_str());
  std::istringstream src(cat.source());
  for (std::string line; std::getline(src, line);)
    if (!line.empty()) std::printf("# source: %s\n", line.c_str());
  std::printf("%-12s %-14s %10s %8s  %-11s %s\n", "gpu", "profile", "fb MiB", "per GPU", "series", "time-sliced");
  for (const auto& p : cat.profiles())
    std::printf("%-12s %-14s %10s %8d  %-11s %s\n", p.gpu.empty() ? "any" : p.gpu.c_str(), p.name.c_str(),
                p.framebuffer_mib ? std::to_string(p.framebuffer_mib).c_str() : "whole", p.max_instances,
                p.series.c_str(), p.time_sliced ? "yes" : "no");
  return 0;
}

int run_detect(const vgpu::Catalog& cat) {
  const vgpu::Detection d = vgpu::detect_gpus(cat);
  std::printf("%s\n", vgpu::to_json(d).dump(2).c_str());
  return 0;
}

struct VmResult {
  json doc;
  int exit_code = -1;
  std::string log;
};

// The VMs' scheduler socket and JSON files; their logs too without --log-dir, then kept when
// something went wrong.
struct ShareDir {
  std::string path;
  bool keep = false;
  ~ShareDir() {
    std::error_code ec;
    if (!path.empty() && !keep) fs::remove_all(path, ec);
  }
};

std::string vm_json_path(const std::string& tmp, int i) { return tmp + "/vm" + std::to_string(i) + ".json"; }

// What every VM runs: `infer` and its options when the arguments after -- start with `infer`,
// else `train`'s options (after an optional `train`).
struct VmCommand {
  std::string name = "train";
  std::vector<std::string> args;
};

VmCommand vm_command(const std::vector<std::string>& after) {
  if (!after.empty() && (after[0] == "infer" || after[0] == "train")) return {after[0], {after.begin() + 1, after.end()}};
  return {"train", after};
}

// `vgpu share`'s own options and the profile they name; the policy parsed.
vgpu::Policy check_share_args(const VgpuArgs& a, const VmCommand& cmd, const vgpu::Profile& p) {
  vgpu::Policy policy;
  try {
    policy = vgpu::parse_policy(a.policy);
  } catch (const std::exception& e) {
    throw Error(std::string("--policy: ") + e.what());
  }
  if (a.vms > p.max_instances)
    throw Error("--vms " + std::to_string(a.vms) + ": " + p.name + " allows at most " +
                std::to_string(p.max_instances) + " vGPU(s) per GPU");
  if (a.vms > 1 && !p.time_sliced)
    throw Error(p.name + " is not time-sliced (" + p.series + "): only time-sliced vGPU profiles share a device");
  if (!(a.slice_ms >= 0.1 && a.slice_ms <= 1000)) throw Error("--slice-ms must be in [0.1, 1000]");
  if (!(a.timeout_s > 0)) throw Error("--timeout must be > 0");
  check_output_path(a.json, "--json");
  for (const auto& x : cmd.args)
    for (const char* owned : {"--json", "--profile", "--vgpu-scheduler", "--ranks", "--timeline", "--vgpu-catalog"})
      if (x == owned || x.rfind(std::string(owned) + "=", 0) == 0)
        throw Error("the " + cmd.name + " options after -- may not set " + owned +
                    ": `ringbench vgpu share` sets it for every VM");
  return policy;
}

// Stop the VMs (not just this process) on Ctrl-C or the sweep's SIGTERM.
void stop_vms_on_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_share_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// Each VM is a job of its own: it must not join a world this process may be part of.
std::vector<RankLaunch> vm_launches(const VgpuArgs& a, const VmCommand& cmd, const vgpu::Profile& p,
                                    const std::string& scheduler, const std::string& tmp, const std::string& log_dir) {
  for (const char* v : {"RINGBENCH_RANK", "RINGBENCH_WORLD_SIZE", "RINGBENCH_STORE", "RINGBENCH_JOB_ID",
                        "RINGBENCH_LAUNCHER", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                        "OMPI_COMM_WORLD_LOCAL_SIZE", "PMIX_RANK"})
    unsetenv(v);
  std::vector<RankLaunch> vms;
  for (int i = 0; i < a.vms; ++i) {
    RankLaunch r;
    r.argv = {self_exe(), cmd.name};
    r.argv.insert(r.argv.end(), cmd.args.begin(), cmd.args.end());
    r.argv.insert(r.argv.end(), {"--profile", p.name, "--vgpu-scheduler", scheduler, "--json", vm_json_path(tmp, i)});
    if (!a.catalog.empty()) r.argv.insert(r.argv.end(), {"--vgpu-catalog", a.catalog});
    r.env = {"OMP_WAIT_POLICY=passive"};
    r.log_path = log_dir + "/vm" + std::to_string(i) + ".log";
    vms.push_back(std::move(r));
  }
  return vms;
}

std::vector<VmResult> vm_results(const LaunchOutcome& o, const std::vector<RankLaunch>& vms, const std::string& tmp) {
  std::vector<VmResult> res(vms.size());
  for (int i = 0; i < int(vms.size()); ++i) {
    VmResult& v = res[size_t(i)];
    v.exit_code = o.exit_codes[size_t(i)];
    v.log = vms[size_t(i)].log_path;
    const std::string path = vm_json_path(tmp, i);
    if (fs::exists(path)) v.doc = json::parse(read_text(path), nullptr, false);
  }
  return res;
}

// The run's meta: this command's settings, and the VMs' (training's or inference's) from the
// first VM's document.
json share_meta(const VgpuArgs& a, const VmCommand& cmd, const std::vector<std::string>& argv,
                const vgpu::Profile& p, vgpu::Policy policy, const VmResult& first) {
  json meta = {{"command", argv}, {"profile", p.name}, {"gpu", p.gpu},
               {"framebuffer_mib", p.framebuffer_mib ? json(p.framebuffer_mib) : json(nullptr)},
               {"max_instances", p.max_instances}, {"policy", vgpu::policy_name(policy)},
               {"slice_ms", a.slice_ms}, {"vms", a.vms}, {"vm_command", cmd.name}, {cmd.name + "_args", cmd.args}};
  if (first.doc.is_object() && first.doc.contains("meta")) {
    const json& m0 = first.doc["meta"];
    for (const char* k : {"model", "batch_per_rank", "backend", "threads_per_rank", "input", "params", "steps",
                          "warmup", "build", "vgpu", "device", "threads", "allowed_batches"})
      if (m0.contains(k)) meta[k] = m0[k];
  }
  return meta;
}

// What went wrong with the VMs, "" when every one of them has its results.
std::string share_errors(const VgpuArgs& a, const VmCommand& cmd, const std::vector<VmResult>& res,
                         const LaunchOutcome& o) {
  std::string errors;
  for (int i = 0; i < a.vms; ++i) {
    const VmResult& v = res[size_t(i)];
    const bool results = v.doc.is_object() && (cmd.name == "infer" ? infer_vm_has_results(v.doc) : v.doc.contains("summary"));
    if (v.exit_code == 0 && results) continue;
    errors += (errors.empty() ? "" : "; ") + std::string("VM ") + std::to_string(i) + " exited " +
              std::to_string(v.exit_code) + ": " + error_lines(v.log, 2);
  }
  if (o.timed_out) errors = "timed out after " + std::to_string(a.timeout_s) + " s; " + errors;
  if (o.interrupted) errors = "interrupted; " + errors;
  return errors;
}

struct ShareTotals {
  double img_s = 0;  // over all VMs
  DeviceWindow device;
};

// Per VM, and the device over the window where every VM was running. The VMs leave their
// warmup together (MeasureBarrier), then each measures and keeps stepping, unmeasured, until
// the last has measured: every VM runs from the earliest start to the latest end of the
// measured steps. Fills doc's "vms" and "summary".
ShareTotals summarize_share(const VgpuArgs& a, const std::vector<VmResult>& res, vgpu::SchedulerServer& server,
                            json& doc) {
  json per_vm = json::array();
  double total = 0, total_var = 0, util_sum = 0, step_sum = 0;
  std::vector<std::array<int64_t, 2>> windows;
  std::vector<double> img;
  for (int i = 0; i < a.vms; ++i) {
    const json& s = res[size_t(i)].doc.at("summary");
    const double m = s.at("total_img_s").at("mean"), ci = s.at("total_img_s").at("ci95");
    const json dev = s.value("device", json::object());
    const double util = dev.value("utilization", 0.0);
    per_vm.push_back({{"vm", i}, {"img_s", {{"mean", m}, {"ci95", ci}}},
                      {"step_s", s.at("step_s").at("mean_over_ranks")}, {"device_util", util},
                      {"device_held_s_per_step", dev.value("held_s_per_step", 0.0)},
                      {"device_wait_s_per_step", dev.value("wait_s_per_step", 0.0)},
                      {"tail_steps", dev.value("tail_steps", 0)},
                      {"device_memory_peak_mib", s.at("device_memory").at("peak_mib")}});
    total += m;
    total_var += ci * ci;
    util_sum += util;
    step_sum += s.at("step_s").at("mean_over_ranks").get<double>();
    img.push_back(m);
    if (dev.contains("window_ns")) windows.push_back({dev["window_ns"][0].get<int64_t>(), dev["window_ns"][1].get<int64_t>()});
  }
  ShareTotals t;
  t.img_s = total;
  t.device = device_window(windows, server.scheduler());
  doc["vms"] = per_vm;
  doc["summary"] = {{"total_img_s", {{"mean", total}, {"ci95", std::sqrt(total_var)}}},
                    {"img_s_per_vm", {{"mean", total / a.vms}, {"min", *std::min_element(img.begin(), img.end())},
                                      {"max", *std::max_element(img.begin(), img.end())}}},
                    {"step_s", step_sum / a.vms}, {"device_util_per_vm", util_sum / a.vms},
                    {"device_util_total", t.device.utilization}, {"common_window_s", t.device.seconds}};
  return t;
}

void print_share(const VgpuArgs& a, const json& per_vm, const ShareTotals& t) {
  std::printf("#  vm        img/s   step (s)  device util\n");
  for (const auto& v : per_vm)
    std::printf("   %2d %8.2f +-%-5.2f %8.4f  %10.1f%%\n", v["vm"].get<int>(), v["img_s"]["mean"].get<double>(),
                v["img_s"]["ci95"].get<double>(), v["step_s"].get<double>(), 100 * v["device_util"].get<double>());
  std::printf("Total img/sec over %d VM(s): %.2f; %s\n", a.vms, t.img_s, t.device.text().c_str());
}

int run_share(const VgpuArgs& a, const std::vector<std::string>& argv) {
  const vgpu::Catalog& cat = catalog(a.catalog);
  const vgpu::Profile* p = cat.find(a.profile);
  if (!p) throw Error("--profile: " + cat.unknown_profile_message(a.profile));
  const VmCommand cmd = vm_command(a.train_args);
  const vgpu::Policy policy = check_share_args(a, cmd, *p);

  stop_vms_on_signals();
  ShareDir tmpdir;
  char tmpl[] = "/tmp/ringbench-share-XXXXXX";
  if (!mkdtemp(tmpl)) throw Error("cannot create a temporary directory for the VMs");
  tmpdir.path = tmpl;
  const std::string tmp = tmpdir.path;
  const std::string log_dir = a.log_dir.empty() ? tmp : a.log_dir;
  fs::create_directories(log_dir);

  vgpu::SchedulerOptions so;
  so.policy = policy;
  // MIG-backed and whole-GPU profiles have their engines to themselves: no slots to share.
  so.max_instances = p->time_sliced ? p->max_instances : 1;
  so.slice = std::chrono::microseconds(static_cast<long>(a.slice_ms * 1000));
  vgpu::SchedulerServer server(tmp + "/scheduler.sock", so, a.vms);  // the VMs measure together

  const std::vector<RankLaunch> vms = vm_launches(a, cmd, *p, server.path(), tmp, log_dir);
  std::printf("# ringbench vgpu share: %d %s VM(s) of %s (%s MiB, %d per GPU) on one device, policy %s, "
              "slice %g ms\n", a.vms, cmd.name == "infer" ? "serving" : "training", p->name.c_str(),
              p->framebuffer_mib ? std::to_string(p->framebuffer_mib).c_str() : "whole", p->max_instances,
              vgpu::policy_name(policy), a.slice_ms);
  std::fflush(stdout);
  const LaunchOutcome o = run_ranks(vms, Millis(static_cast<long>(a.timeout_s * 1000)), Millis(5000), &g_share_stop);

  const std::vector<VmResult> res = vm_results(o, vms, tmp);
  json doc;
  doc["meta"] = share_meta(a, cmd, argv, *p, policy, res[0]);
  auto write = [&] {
    if (!a.json.empty()) write_file_atomic(a.json, doc.dump(2) + "\n");
  };

  // Does not fit: every VM runs the same model and batch, so one is enough to say so.
  for (const auto& v : res)
    if (v.exit_code == kDoesNotFitExit && v.doc.is_object() && v.doc.contains("does_not_fit")) {
      doc["does_not_fit"] = v.doc["does_not_fit"];
      write();
      std::printf("does not fit: %s\n", v.doc["does_not_fit"].value("message", "").c_str());
      return kDoesNotFitExit;
    }
  const std::string errors = share_errors(a, cmd, res, o);
  if (!errors.empty()) {
    doc["error"] = errors;
    tmpdir.keep = a.log_dir.empty();  // the VMs' logs are there
    write();
    std::fprintf(stderr, "ringbench vgpu share: error: %s (logs in %s)\n", errors.c_str(), log_dir.c_str());
    return 1;
  }

  if (cmd.name == "infer") {
    std::vector<json> docs;
    for (const auto& v : res) docs.push_back(v.doc);
    const DeviceWindow device = summarize_infer_share(docs, server.scheduler(), doc);
    write();
    print_infer_share(doc, device);
    return 0;
  }
  const ShareTotals totals = summarize_share(a, res, server, doc);
  write();
  print_share(a, doc["vms"], totals);
  return 0;
}

}  // namespace

int run_vgpu(const VgpuArgs& a, const std::vector<std::string>& argv) {
  if (a.action == "profiles") return run_profiles(catalog(a.catalog));
  if (a.action == "detect") return run_detect(catalog(a.catalog));
  if (a.action == "share") return run_share(a, argv);
  return 2;
}

}  // namespace ringbench
