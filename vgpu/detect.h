// What GPU this machine has and whether it is a vGPU: NVML (dlopen'ed libnvidia-ml.so.1, so the
// binary does not depend on the driver), else `nvidia-smi -q`, else none.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vgpu/catalog.h"

namespace ringbench::vgpu {

struct GpuInfo {
  int index = 0;
  std::string name;            // as the driver reports it, "GRID T4-4C"
  int64_t memory_mib = 0;      // total framebuffer the driver reports
  std::string virtualization;  // "none" (bare metal), "passthrough", "vgpu" (a guest's vGPU), "host_vgpu", "unknown"
  std::string profile;         // the catalog profile: a vGPU's, "passthrough", "bare-metal"; "" if unknown
};

struct Detection {
  std::string source;          // "nvml", "nvidia-smi" or "none"
  std::string driver_version;  // "" when unknown
  std::vector<GpuInfo> gpus;
  std::string note;            // why there is nothing, or what was unusual
  // "vgpu", "passthrough", "bare-metal" (GPU 0's), or "none" without a GPU.
  std::string kind() const;
};

Detection detect_gpus(const Catalog& catalog = Catalog::builtin());
// The parsers behind detect_gpus, for tests: `nvidia-smi -q` output.
Detection parse_nvidia_smi_q(const std::string& text, const Catalog& catalog = Catalog::builtin());
nlohmann::json to_json(const Detection& d);

// How a sweep point's profile relates to the machine.
struct ProfileMatch {
  std::string mode;     // "none" (no profile asked), "real", "emulated" or "mismatch"
  std::string message;  // one line for logs and the report, e.g. why it is a mismatch
};
// wanted: a catalog profile name or "none". A vGPU VM matches only its own profile (anything
// else is a mismatch: we cannot emulate a profile inside a real vGPU); passthrough and bare
// metal match their own kind and emulate any vGPU profile; without a GPU every profile is
// emulated on the CPU.
ProfileMatch match_profile(const std::string& wanted, const Detection& d, const Catalog& catalog = Catalog::builtin());

}  // namespace ringbench::vgpu
