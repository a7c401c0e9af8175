#include "runner/cli/share_infer.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <optional>

#include "runner/infer/server_json.h"

namespace ringbench {

using json = nlohmann::json;  // not in the anonymous namespace: clang -Wshadow, unity batches

namespace {

json spread(const std::vector<double>& v) {
  if (v.empty()) return nullptr;
  return {{"mean", std::accumulate(v.begin(), v.end(), 0.0) / double(v.size())},
          {"min", *std::min_element(v.begin(), v.end())}, {"max", *std::max_element(v.begin(), v.end())}};
}

// Per VM, what the report reads: its scenarios as `ringbench infer` wrote them, and its device.
json vm_entry(const json& d, int i) {
  json v = {{"vm", i}};
  for (const char* k : {"offline", "single_stream", "server", "device"})
    if (d.contains(k)) v[k] = d[k];
  return v;
}

}  // namespace

bool infer_vm_has_results(const json& doc) {
  return doc.contains("offline") || doc.contains("single_stream") || doc.contains("server");
}

DeviceWindow summarize_infer_share(const std::vector<json>& vm_docs, const vgpu::SliceScheduler& s, json& doc) {
  json vms = json::array();
  std::vector<double> qps, offline, util;
  std::vector<std::array<int64_t, 2>> windows;
  bool every_vm_met = true;
  int offline_batch = 0;
  for (size_t i = 0; i < vm_docs.size(); ++i) {
    const json& d = vm_docs[i];
    vms.push_back(vm_entry(d, int(i)));
    if (d.contains("server")) {
      const auto q = infer::qps_at_bound(d["server"]);
      every_vm_met = every_vm_met && q.has_value();
      if (q) qps.push_back(*q);
    }
    if (const json* o = infer::largest_offline_run(d)) {
      offline.push_back(o->value("samples_per_s", 0.0));
      offline_batch = o->value("batch", 0);
    }
    const json dev = d.value("device", json::object());
    if (dev.contains("utilization")) util.push_back(dev["utilization"].get<double>());
    if (dev.contains("window_ns")) windows.push_back({dev["window_ns"][0].get<int64_t>(), dev["window_ns"][1].get<int64_t>()});
  }
  const DeviceWindow device = device_window(windows, s);
  json summary = {{"device_util_per_vm", util.empty() ? json(nullptr) : spread(util)["mean"]},
                  {"device_util_total", device.utilization}, {"common_window_s", device.seconds}};
  if (vm_docs.front().contains("server"))
    summary["qps_at_bound"] = {
        {"total", every_vm_met ? json(std::accumulate(qps.begin(), qps.end(), 0.0)) : json(nullptr)},
        {"per_vm", spread(qps)}, {"vms_met", qps.size()}};
  if (!offline.empty())
    summary["offline"] = {{"batch", offline_batch},
                          {"total_samples_per_s", std::accumulate(offline.begin(), offline.end(), 0.0)},
                          {"per_vm", spread(offline)}};
  doc["vms"] = vms;
  doc["memory"] = vm_docs.front().value("memory", json(nullptr));
  doc["summary"] = summary;
  return device;
}

void print_infer_share(const json& doc, const DeviceWindow& device) {
  const auto cell = [](std::optional<double> v, double scale) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", v ? *v * scale : 0.0);
    return v ? std::string(b) : std::string("-");
  };
  std::printf("#  vm  QPS at p99 bound   p99 ms  Offline samples/s  device util\n");
  for (const auto& v : doc["vms"]) {
    const json server = v.value("server", json());
    const json* run = infer::server_headline_run(server);
    const json* o = infer::largest_offline_run(v);
    const json dev = v.value("device", json::object());
    std::printf("   %2d  %16s %8s %18s %11s\n", v["vm"].get<int>(), cell(infer::qps_at_bound(server), 1).c_str(),
                cell(run ? run->value("tail_latency_s", 0.0) : std::optional<double>(), 1e3).c_str(),
                cell(o ? o->value("samples_per_s", 0.0) : std::optional<double>(), 1).c_str(),
                (cell(dev.contains("utilization") ? dev["utilization"].get<double>() : std::optional<double>(), 100) + "%").c_str());
  }
  const json& s = doc["summary"];
  const int n = int(doc["vms"].size());
  if (s.contains("qps_at_bound")) {
    const json& t = s["qps_at_bound"]["total"];
    if (t.is_null())
      std::printf("Total QPS at the p99 bound over %d VM(s): none (%d of %d VM(s) met the bound at some rate)\n", n,
                  s["qps_at_bound"]["vms_met"].get<int>(), n);
    else
      std::printf("Total QPS at the p99 bound over %d VM(s): %.1f\n", n, t.get<double>());
  }
  if (s.contains("offline"))
    std::printf("Total Offline samples/s at batch %d over %d VM(s): %.1f\n", s["offline"]["batch"].get<int>(), n,
                s["offline"]["total_samples_per_s"].get<double>());
  std::printf("%s\n", device.text().c_str());
}

}  // namespace ringbench
