// A sweep config's `infer:` section: `ringbench infer` runs (MLPerf LoadGen's scenarios), one
// point per model entry and vGPU profile on one node, with the section's scenarios, Offline
// batches, Server latency bound and run rules; with `sharing`, per time-sliced profile, model and
// policy, a point of 1 VM and one of k VMs serving at once (`ringbench vgpu share -- infer`).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/sweep/vgpu_keys.h"

namespace ringbench {

class YamlReader;
struct SweepPoint;

struct InferModel {
  std::string model;
  int image_size = 0;  // 0: the model's default
  int max_batch = 8;   // the largest batch served
};

struct InferSweep {
  std::vector<InferModel> models;
  std::vector<std::string> scenarios{"offline", "single-stream", "server"};
  std::vector<int> batches;        // Offline's batch sizes (empty: every served size)
  double latency_bound_ms = 10;    // Server's p99 bound
  double batch_timeout_ms = 1;
  double server_qps = 0;           // 0: search for the peak QPS
  double min_duration_s = -1;      // -1: LoadGen's 600 s
  int min_queries = -1;            // -1: LoadGen's per scenario
  double max_duration_s = 3600;
  std::string backend = "auto";
  std::vector<std::string> profiles{"none"};  // vGPU profiles each model is served under
  bool has_sharing = false;
  SharingConfig sharing;  // k VMs serving at once on one device of each time-sliced profile
  // sharing.scenarios and sharing.models: what the VMs run (empty: the section's scenarios and
  // every model); their Offline runs are at the largest batch only.
  std::vector<std::string> sharing_scenarios, sharing_models;
};

// Parses and validates the section (`r` reads "infer"; profiles are the catalog's); every error
// names its key.
InferSweep parse_infer(const YamlReader& r, const vgpu::Catalog& catalog);
nlohmann::json to_json(const InferSweep& s);

// The section's points of one repeat, in the order run: per profile every model, then per
// time-sliced profile, model and policy the sharing points (1 VM, k VMs).
void for_each_infer_point(const InferSweep& s, const vgpu::Catalog& catalog, int repeat,
                          const std::function<void(const SweepPoint&)>& visit);

// The `ringbench infer` arguments of one model entry (without --json and --threads); `shared`:
// those of a VM sharing a device (sharing's scenarios, Offline at max_batch only).
std::vector<std::string> infer_args(const InferSweep& s, const std::string& model, int image_size, int max_batch,
                                    uint64_t seed, bool shared = false);

}  // namespace ringbench
