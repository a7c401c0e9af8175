// A sweep config's vGPU keys, read the same way at the top level (train points) and in the
// infer: section: `profiles` (the catalog's profiles, or none) and `sharing` (k emulated VMs on
// one time-sliced device under each scheduler policy).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ringbench {

namespace vgpu {
class Catalog;
}
class YamlReader;

// k emulated VMs of one vGPU profile time-sliced on one device (`ringbench vgpu share`): for
// every time-sliced profile, model and policy, points with 1 VM and with k VMs.
struct SharingConfig {
  int vms_per_gpu = 2;
  std::vector<std::string> policies{"best_effort", "equal_share", "fixed_share"};
  double slice_ms = 10;
};

// r's `sharing` mapping (r reads it): vms_per_gpu, policy (one or a list), slice_ms, and the
// caller's `more_keys` (read by the caller).
SharingConfig parse_sharing(const YamlReader& r, const std::vector<std::string>& more_keys = {});
nlohmann::json to_json(const SharingConfig& s);

// r's `profiles` list: each the catalog's name of a profile (in its spelling) or none, none
// listed twice; every error names r's key.
std::vector<std::string> parse_profiles(const YamlReader& r, const vgpu::Catalog& catalog);

// Whether one of `profiles` is a time-sliced profile of the catalog (one that VMs can share).
bool has_time_sliced(const std::vector<std::string>& profiles, const vgpu::Catalog& catalog);

// `sharing`'s points of one (model, time-sliced profile, policy): 1 VM, and k VMs when k > 1.
std::vector<int> shared_vm_counts(const SharingConfig& s);

}  // namespace ringbench
