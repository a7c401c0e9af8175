// vGPU profiles in ringbench: a training job's profile (checked against the machine, its
// framebuffer enforced as a cap on the backend's memory when emulated), and the `ringbench vgpu`
// commands: `profiles` (the catalog), `detect` (this machine's GPU) and `share` (k emulated VMs
// time-sliced on one device by a policy, each an independent training or inference job).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/device_memory.h"
#include "models/device_gate.h"
#include "runner/record/train_args.h"

namespace ringbench {

namespace vgpu {
class SliceScheduler;
}

// Exit status of a `ringbench train` whose model and batch do not fit the profile's framebuffer.
inline constexpr int kDoesNotFitExit = 3;

// What a training process does with its profile, before it allocates anything.
struct VgpuSetup {
  std::string profile = "none";
  std::string mode = "none";  // none | real | emulated | mismatch (see vgpu/detect.h)
  std::string message;
  int64_t framebuffer_mib = 0;  // the emulated cap on the backend's memory (0: none)
  int64_t profile_framebuffer_mib = 0;  // the profile's own (0: the whole device)
  std::string gpu;                      // the profile's GPU model ("" for the whole-GPU entries)
  int max_instances = 1;
  nlohmann::json detection;
  std::unique_ptr<models::DeviceGate> gate;  // with --vgpu-scheduler
  nlohmann::json to_json() const;
};
// Throws Error on an unknown profile, or a mismatch without allow_mismatch.
VgpuSetup setup_vgpu(const VgpuTrainArgs& a, const std::string& backend, double timeout_s);

// A job's "does_not_fit" record: the framebuffer, what was asked for and what was in use (MiB),
// the allocation and the message (`ringbench infer`'s JSON; train writes the same fields).
nlohmann::json does_not_fit_json(const DeviceOutOfMemory& e, const std::string& profile);

// The device over the window in which VMs sharing it measured, from the earliest start to the
// latest end of their measured windows (CLOCK_MONOTONIC nanoseconds, as the scheduler records
// its grants): the fraction of it in which any VM held the device (null: no window known).
struct DeviceWindow {
  nlohmann::json utilization = nullptr;
  double seconds = 0;
  std::string text() const;  // "device utilization 97% over the 12.30 s the VMs ran together"
};
DeviceWindow device_window(const std::vector<std::array<int64_t, 2>>& windows, const vgpu::SliceScheduler& s);

struct VgpuArgs {
  std::string action;  // profiles | detect | share
  std::string catalog;
  // share
  int vms = 2;
  std::string policy = "best_effort", profile;
  double slice_ms = 10;
  double timeout_s = 600;
  std::string json, log_dir;
  // After --: `infer` and its options (the VMs serve), or `train`'s options, optionally after
  // `train` (the VMs train).
  std::vector<std::string> train_args;
};
int run_vgpu(const VgpuArgs& a, const std::vector<std::string>& argv);

}  // namespace ringbench
