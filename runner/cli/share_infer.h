// `ringbench vgpu share -- infer ...`: k emulated VMs serving at once on one time-sliced device,
// each an independent `ringbench infer` job. What each VM measured (its scenarios' results and
// its share of the device) and the totals over the VMs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/cli/vgpu_cmd.h"

namespace ringbench {

// An infer document with at least one scenario's results.
bool infer_vm_has_results(const nlohmann::json& doc);

// Fills doc's "vms" (each VM's scenarios and device share, in VM order), "memory" (the first
// VM's: they serve the same model) and "summary": the QPS at the p99 bound per VM and in total
// (null when a VM met the bound at no rate), Offline samples/s at the largest batch per VM and
// in total, the device utilization per VM and over the window in which the VMs measured.
DeviceWindow summarize_infer_share(const std::vector<nlohmann::json>& vm_docs, const vgpu::SliceScheduler& s,
                                   nlohmann::json& doc);

// One line per VM, then the totals.
void print_infer_share(const nlohmann::json& doc, const DeviceWindow& device);

}  // namespace ringbench
