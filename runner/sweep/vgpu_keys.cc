#include "runner/sweep/vgpu_keys.h"

#include <set>

#include "runner/record/yaml_reader.h"
#include "vgpu/catalog.h"
#include "vgpu/scheduler.h"
#include "runner/record/point.h"

namespace ringbench {

SharingConfig parse_sharing(const YamlReader& r, const std::vector<std::string>& more_keys) {
  SharingConfig s;
  std::vector<std::string> keys = {"vms_per_gpu", "policy", "slice_ms"};
  keys.insert(keys.end(), more_keys.begin(), more_keys.end());
  r.only(keys);
  r.get_int("vms_per_gpu", s.vms_per_gpu, 1, kMaxVms);
  if (r.has("policy")) {
    if (r.at("policy").IsScalar()) {
      std::string one;
      r.get("policy", one, "a policy name");
      s.policies = {one};
    } else {
      s.policies = r.list<std::string>("policy", "policy names");
    }
  }
  std::set<std::string> seen;
  for (const auto& p : s.policies) {
    try {
      vgpu::parse_policy(p);
    } catch (const std::exception& e) {
      r.fail(r.key("policy"), e.what());
    }
    if (!seen.insert(p).second) r.fail(r.key("policy"), p + " is listed twice");
  }
  r.get_double("slice_ms", s.slice_ms, 0.1, 10e3);
  if (s.slice_ms > 1000) r.fail(r.key("slice_ms"), "must be <= 1000");
  return s;
}

nlohmann::json to_json(const SharingConfig& s) {
  return {{"vms_per_gpu", s.vms_per_gpu}, {"policy", s.policies}, {"slice_ms", s.slice_ms}};
}

std::vector<std::string> parse_profiles(const YamlReader& r, const vgpu::Catalog& catalog) {
  std::vector<std::string> profiles = r.list<std::string>("profiles", "profile names");
  std::set<std::string> seen;
  for (auto& p : profiles) {
    if (p != "none") {
      const vgpu::Profile* known = catalog.find(p);
      if (!known) r.fail(r.key("profiles"), catalog.unknown_profile_message(p));
      p = known->name;  // the catalog's spelling
    }
    if (!seen.insert(p).second) r.fail(r.key("profiles"), p + " is listed twice");
  }
  return profiles;
}

bool has_time_sliced(const std::vector<std::string>& profiles, const vgpu::Catalog& catalog) {
  for (const auto& p : profiles)
    if (p != "none" && catalog.find(p) && catalog.find(p)->time_sliced) return true;
  return false;
}

std::vector<int> shared_vm_counts(const SharingConfig& s) {
  return s.vms_per_gpu == 1 ? std::vector<int>{1} : std::vector<int>{1, s.vms_per_gpu};
}

}  // namespace ringbench
