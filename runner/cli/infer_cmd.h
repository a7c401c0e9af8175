// `ringbench infer`: a model's forward pass served the way MLPerf Inference's LoadGen measures
// a system (runner/infer/): Offline throughput against batch, SingleStream latency, and the
// Server scenario's highest QPS whose p99 meets a latency bound, with inference's memory against
// training's at the same batch. Under a vGPU profile (--profile) the framebuffer caps the served
// networks' memory, and with a scheduler (--vgpu-scheduler, from `ringbench vgpu share -- infer`)
// every batch's forward pass runs in the time slices it grants.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "runner/cli/vgpu_cmd.h"

namespace ringbench {

struct InferArgs {
  std::string model = "mobilenet_v1", backend = "auto", device = "auto";
  std::string precision = "fp32";  // fp32 | tf32 | bf16 | fp16 (models::Precision)
  int image_size = 0, threads = 0, max_batch = 32;
  std::string scenarios = "offline,single-stream,server";
  std::vector<int> batches;  // Offline's sweep (each <= max_batch); empty: every served size
  double latency_bound_ms = 10;  // Server: LoadGen's default target latency
  double batch_timeout_ms = 1;   // Server: dynamic batching's longest wait
  double server_qps = 0;         // Server: one run at this rate; 0: search for the peak
  uint64_t seed = 42;            // the arrivals' and the parameters'
  double min_duration_s = -1;    // -1: LoadGen's (600 s)
  int64_t min_queries = -1;      // -1: LoadGen's for each scenario
  double max_duration_s = 3600;
  std::string json_path;
  std::string checkpoint;  // --checkpoint: trained parameters (train --save-checkpoint); "": seeded
  bool accuracy = false;   // --accuracy: the test set's accuracy instead of the scenarios
  std::string data, data_dir;  // --accuracy's dataset (fashion-mnist) and where it is
  VgpuTrainArgs vgpu;  // --profile, --allow-profile-mismatch, --vgpu-catalog, --vgpu-scheduler (as train's)
  double timeout_s = 60;  // --timeout: the longest wait for the vGPU scheduler (or a remote device)
  std::string secret_file;  // --device remote: the device server's secret (else RINGBENCH_SECRET)
};

void add_infer_options(CLI::App& cmd, InferArgs& a);
int run_infer(const InferArgs& a);

}  // namespace ringbench
