// The vGPU profile catalog (configs/vgpu-profiles.yaml, compiled into the binary): for each
// physical GPU, the profiles NVIDIA's vGPU software offers, with framebuffer and the maximum
// number of vGPUs of that profile per GPU, plus the whole-GPU entries `passthrough` and
// `bare-metal`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ringbench::vgpu {

struct Profile {
  std::string name;             // "T4-4C", "A100-1-5C", or "passthrough" / "bare-metal"
  std::string gpu;              // the physical GPU's catalog model, "T4"; empty for the whole-GPU entries
  std::string series;           // "Q", "C", "B", "A", "MIG-C", ... or "passthrough" / "bare-metal"
  int64_t framebuffer_mib = 0;  // 0 for the whole-GPU entries: all of the device's memory
  int max_instances = 1;        // vGPUs of this profile one physical GPU can host
  bool time_sliced = true;      // false: MIG-backed (own engines) or whole GPU; no time slicing
  bool whole_gpu() const { return series == "passthrough" || series == "bare-metal"; }
};

struct GpuModel {
  std::string model;       // catalog key and NVIDIA's prefix of its profiles, "T4", "A100D"
  std::string board;       // what NVML reports on bare metal / passthrough, "Tesla T4" (boards[0])
  int64_t memory_mib = 0;  // the board's memory
  std::string description;          // as NVIDIA's tables title it, "NVIDIA A100 PCIe 80GB"
  std::vector<std::string> boards;  // every name NVML may report for it, board first
};

class Catalog {
 public:
  // The catalog compiled into this binary (configs/vgpu-profiles.yaml at build time).
  static const Catalog& builtin();
  static Catalog load(const std::string& path);  // errors: Error "path: key: problem"
  static Catalog parse(const std::string& yaml, const std::string& origin);

  const Profile* find(const std::string& name) const;  // exact, case-insensitive; nullptr if unknown
  const GpuModel* gpu(const std::string& model) const;
  // The GPU model whose boards include `board_name` (case-insensitive, a leading "NVIDIA "
  // ignored on both sides), or nullptr.
  const GpuModel* gpu_for_board(const std::string& board_name) const;
  std::vector<const Profile*> profiles_of(const std::string& model) const;  // in file order
  const std::vector<Profile>& profiles() const { return profiles_; }
  const std::vector<GpuModel>& gpus() const { return gpus_; }
  const std::string& source() const { return source_; }  // the documents the numbers come from
  const std::string& origin() const { return origin_; }  // file name, or "built-in"
  // "unknown vGPU profile 'T4-3C'; T4 has T4-1Q, ..., T4-16C (see `ringbench vgpu profiles`)"
  std::string unknown_profile_message(const std::string& name) const;

 private:
  std::vector<Profile> profiles_;
  std::vector<GpuModel> gpus_;
  std::string source_, origin_;
};

// The profile in a vGPU's device name as the guest driver reports it ("GRID T4-4C",
// "NVIDIA A100-4C", "NVIDIA A100D-1-10C", "GRID P40-24Q"), or nullopt when the name is a
// physical board ("Tesla T4", "NVIDIA A100-SXM4-40GB").
std::optional<std::string> profile_from_device_name(const std::string& device_name);

}  // namespace ringbench::vgpu
