// A sweep config's `infer:` section: `ringbench infer` runs (MLPerf LoadGen's scenarios), one
// point per model entry on one node, with the section's scenarios, Offline batches, Server
// latency bound and run rules.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ringbench {

class YamlReader;

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
};

// Parses and validates the section (`r` reads "infer"); every error names its key.
InferSweep parse_infer(const YamlReader& r);
nlohmann::json to_json(const InferSweep& s);

// The `ringbench infer` arguments of one model entry (without --json and --threads).
std::vector<std::string> infer_args(const InferSweep& s, const std::string& model, int image_size, int max_batch,
                                    uint64_t seed);

}  // namespace ringbench
