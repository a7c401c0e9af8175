#include "vgpu/detect.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "base/text.h"

namespace ringbench::vgpu {
namespace {

// The few NVML declarations detection needs, as nvml.h gives them (stable since R418): the
// library is dlopen'ed so that ringbench neither links nor needs the driver.
using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlMemory_t {  // bytes
  unsigned long long total, free, used;
};
// nvmlGpuVirtualizationMode_t
constexpr int kModeNone = 0, kModePassthrough = 1, kModeVgpu = 2, kModeHostVgpu = 3, kModeHostVsga = 4;
constexpr unsigned kDriverVersionBuffer = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
constexpr unsigned kDeviceNameBuffer = 96;     // NVML_DEVICE_NAME_V2_BUFFER_SIZE

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using DriverVersionFn = nvmlReturn_t (*)(char*, unsigned);
using CountFn = nvmlReturn_t (*)(unsigned*);
using HandleFn = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
using NameFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
using MemoryFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using VirtualizationFn = nvmlReturn_t (*)(nvmlDevice_t, int*);

constexpr int kSmiTimeoutS = 10;

void add_note(std::string& note, const std::string& more) {
  if (!more.empty()) note += (note.empty() ? "" : "; ") + more;
}

std::string mode_name(int mode) {
  switch (mode) {
    case kModeNone:
      return "none";
    case kModePassthrough:
      return "passthrough";
    case kModeVgpu:
      return "vgpu";
    case kModeHostVgpu:
    case kModeHostVsga:
      return "host_vgpu";
    default:
      return "unknown";
  }
}

// nvidia-smi -q spells the modes "None", "Pass-Through", "VGPU", "Host VGPU", "Host VSGA".
std::string smi_mode_name(const std::string& value) {
  std::string key;
  for (char ch : lower(value))
    if (std::isalnum(static_cast<unsigned char>(ch))) key += ch;
  if (key == "none") return "none";
  if (key == "passthrough") return "passthrough";
  if (key == "vgpu") return "vgpu";
  if (key == "hostvgpu" || key == "hostvsga") return "host_vgpu";
  return "unknown";
}

// Sets each GPU's catalog profile from its virtualization mode and name, and says in the note
// what could not be told.
void classify(Detection& d, const Catalog& catalog) {
  for (auto& g : d.gpus) {
    const std::string which = "GPU " + std::to_string(g.index) + " ('" + g.name + "')";
    const std::optional<std::string> type = profile_from_device_name(g.name);
    if (g.virtualization == "unknown" && type) g.virtualization = "vgpu";  // the name says so
    if (g.virtualization == "vgpu") {
      const Profile* p = type ? catalog.find(*type) : nullptr;
      g.profile = p != nullptr ? p->name : "";
      if (!type)
        add_note(d.note, which + " is a vGPU whose profile its name does not give");
      else if (p == nullptr)
        add_note(d.note, which + " is a vGPU of profile " + *type + ", which the catalog (" + catalog.origin() +
                             ") does not list");
    } else if (g.virtualization == "passthrough") {
      g.profile = "passthrough";
    } else {
      g.profile = "bare-metal";
      if (g.virtualization == "host_vgpu")
        add_note(d.note, which + " belongs to a vGPU hypervisor (host mode): treated as bare metal");
      else if (g.virtualization == "unknown")
        add_note(d.note, which + ": virtualization mode unknown, treated as bare metal");
    }
  }
}

// ---- NVML ----

class NvmlLibrary {
 public:
  NvmlLibrary() : handle_(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {}
  ~NvmlLibrary() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;
  bool loaded() const { return handle_ != nullptr; }

  // The function `name`, or nullptr (and `missing` names it) when the library lacks it.
  template <class Fn>
  Fn get(const char* name, std::string& missing) const {
    void* sym = dlsym(handle_, name);
    if (sym == nullptr && missing.empty()) missing = name;
    return reinterpret_cast<Fn>(sym);
  }

 private:
  void* handle_;
};

std::optional<Detection> detect_nvml(std::string& why) {
  const NvmlLibrary lib;
  if (!lib.loaded()) {
    why = "libnvidia-ml.so.1 not found";
    return std::nullopt;
  }
  std::string missing;
  const auto init = lib.get<InitFn>("nvmlInit_v2", missing);
  const auto shutdown = lib.get<ShutdownFn>("nvmlShutdown", missing);
  const auto driver_version = lib.get<DriverVersionFn>("nvmlSystemGetDriverVersion", missing);
  const auto count = lib.get<CountFn>("nvmlDeviceGetCount_v2", missing);
  const auto handle_by_index = lib.get<HandleFn>("nvmlDeviceGetHandleByIndex_v2", missing);
  const auto name = lib.get<NameFn>("nvmlDeviceGetName", missing);
  const auto memory = lib.get<MemoryFn>("nvmlDeviceGetMemoryInfo", missing);
  const auto virtualization = lib.get<VirtualizationFn>("nvmlDeviceGetVirtualizationMode", missing);
  if (!missing.empty()) {
    why = "libnvidia-ml.so.1 lacks " + missing;
    return std::nullopt;
  }
  std::string unused;
  const auto error_string = lib.get<ErrorStringFn>("nvmlErrorString", unused);
  auto error = [&](nvmlReturn_t rc) {
    const char* s = error_string != nullptr ? error_string(rc) : nullptr;
    return "NVML error " + std::to_string(rc) + (s != nullptr ? std::string(" (") + s + ")" : "");
  };

  if (const nvmlReturn_t rc = init(); rc != kNvmlSuccess) {
    why = "nvmlInit_v2 failed: " + error(rc);
    return std::nullopt;
  }
  struct Shutdown {
    ShutdownFn fn;
    ~Shutdown() { fn(); }
  } shutdown_at_exit{shutdown};

  Detection d;
  d.source = "nvml";
  char text[kDeviceNameBuffer] = {};
  static_assert(kDeviceNameBuffer >= kDriverVersionBuffer);
  if (driver_version(text, kDriverVersionBuffer) == kNvmlSuccess) d.driver_version = text;
  unsigned n = 0;
  if (const nvmlReturn_t rc = count(&n); rc != kNvmlSuccess) {
    why = "nvmlDeviceGetCount_v2 failed: " + error(rc);
    return std::nullopt;
  }
  for (unsigned i = 0; i < n; ++i) {
    GpuInfo g;
    g.index = static_cast<int>(i);
    nvmlDevice_t dev = nullptr;
    if (const nvmlReturn_t rc = handle_by_index(i, &dev); rc != kNvmlSuccess) {
      add_note(d.note, "GPU " + std::to_string(i) + " skipped: " + error(rc));
      continue;
    }
    text[0] = '\0';
    if (name(dev, text, kDeviceNameBuffer) == kNvmlSuccess) g.name = text;
    nvmlMemory_t mem{};
    if (memory(dev, &mem) == kNvmlSuccess) g.memory_mib = static_cast<int64_t>(mem.total / (1024 * 1024));
    int mode = -1;
    g.virtualization = virtualization(dev, &mode) == kNvmlSuccess ? mode_name(mode) : "unknown";
    d.gpus.push_back(std::move(g));
  }
  if (d.gpus.empty()) add_note(d.note, "the NVIDIA driver is loaded but NVML lists no GPU");
  return d;
}

// ---- nvidia-smi ----

bool on_path(const std::string& exe) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (access(((dir.empty() ? "." : dir) + "/" + exe).c_str(), X_OK) == 0) return true;
  return false;
}

std::optional<Detection> detect_nvidia_smi(const Catalog& catalog, std::string& why) {
  if (!on_path("nvidia-smi")) {
    why = "nvidia-smi not on PATH";
    return std::nullopt;
  }
  const std::string cmd = "timeout " + std::to_string(kSmiTimeoutS) + " nvidia-smi -q 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    why = "cannot run nvidia-smi";
    return std::nullopt;
  }
  std::string out;
  char buf[4096];
  for (size_t got; (got = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, got);
  const int status = pclose(pipe);
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (rc != 0) {
    const std::string first = trim(out.substr(0, out.find('\n')));
    why = rc == 124 ? "nvidia-smi -q did not answer within " + std::to_string(kSmiTimeoutS) + " s"
                    : "nvidia-smi -q failed (exit " + std::to_string(rc) + (first.empty() ? "" : ": " + first) + ")";
    return std::nullopt;
  }
  return parse_nvidia_smi_q(out, catalog);
}

}  // namespace

std::string Detection::kind() const {
  if (gpus.empty()) return "none";
  const std::string& v = gpus.front().virtualization;
  if (v == "vgpu") return "vgpu";
  if (v == "passthrough") return "passthrough";
  return "bare-metal";  // none, a hypervisor's own GPU (host_vgpu), or unknown
}

Detection parse_nvidia_smi_q(const std::string& text, const Catalog& catalog) {
  Detection d;
  d.source = "nvidia-smi";
  struct Section {
    size_t indent;
    std::string name;
  };
  std::vector<Section> sections;  // the headers enclosing the current line, inside a GPU block
  GpuInfo* gpu = nullptr;
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const std::string t = trim(line);
    if (t.empty()) continue;
    const size_t indent = line.find_first_not_of(" \t");
    const size_t colon = t.find(':');
    if (indent == 0) {
      // "GPU 00000000:02:00.0" opens a GPU's block; any other unindented line closes it.
      gpu = nullptr;
      if (t.rfind("GPU ", 0) == 0 && colon != std::string::npos && t.find(' ', 4) == std::string::npos) {
        GpuInfo g;
        g.index = static_cast<int>(d.gpus.size());
        g.virtualization = "unknown";
        d.gpus.push_back(g);
        gpu = &d.gpus.back();
        sections.clear();
      } else if (colon != std::string::npos && trim(t.substr(0, colon)) == "Driver Version") {
        d.driver_version = trim(t.substr(colon + 1));
      }
      continue;
    }
    if (gpu == nullptr) continue;
    while (!sections.empty() && sections.back().indent >= indent) sections.pop_back();
    if (colon == std::string::npos) {
      sections.push_back({indent, t});
      continue;
    }
    // Only the GPU's own fields: a MIG device's "FB Memory Usage" or the licensed product's
    // "Product Name" sit deeper.
    const std::string key = trim(t.substr(0, colon)), value = trim(t.substr(colon + 1));
    const std::string section = sections.size() == 1 ? sections.front().name : sections.empty() ? "" : "(nested)";
    if (sections.empty() && key == "Product Name") {
      gpu->name = value;
    } else if (section == "FB Memory Usage" && key == "Total") {
      gpu->memory_mib = !value.empty() && std::isdigit(static_cast<unsigned char>(value[0])) ? std::stoll(value) : 0;
    } else if (section == "GPU Virtualization Mode" && key == "Virtualization Mode") {
      gpu->virtualization = smi_mode_name(value);
    }
  }
  if (d.gpus.empty()) add_note(d.note, "nvidia-smi -q lists no GPU");
  classify(d, catalog);
  return d;
}

Detection detect_gpus(const Catalog& catalog) {
  std::string nvml_why, smi_why;
  if (std::optional<Detection> d = detect_nvml(nvml_why)) {
    classify(*d, catalog);
    return *d;
  }
  if (std::optional<Detection> d = detect_nvidia_smi(catalog, smi_why)) {
    add_note(d->note, "read from nvidia-smi -q because NVML is unusable (" + nvml_why + ")");
    return *d;
  }
  Detection d;
  d.source = "none";
  d.note = "no NVIDIA driver (" + nvml_why + ", " + smi_why + "): profiles are emulated on the CPU";
  return d;
}

nlohmann::json to_json(const Detection& d) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : d.gpus)
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"memory_mib", g.memory_mib},
                    {"virtualization", g.virtualization},
                    {"profile", g.profile}});
  return {{"source", d.source}, {"driver", d.driver_version}, {"kind", d.kind()}, {"gpus", gpus}, {"note", d.note}};
}

ProfileMatch match_profile(const std::string& wanted, const Detection& d, const Catalog& catalog) {
  if (lower(wanted) == "none") return {"none", "no vGPU profile asked"};
  const Profile* p = catalog.find(wanted);
  if (p == nullptr) throw std::invalid_argument(catalog.unknown_profile_message(wanted));

  // What ringbench enforces when it emulates `p`.
  const std::string limits =
      p->whole_gpu() ? "no framebuffer cap"
                     : "framebuffer cap " + std::to_string(p->framebuffer_mib) + " MiB, " +
                           (p->time_sliced ? "time slicing by ringbench" : "a MIG slice of its own (no time slicing)");
  const std::string mismatch_tail = "; pass --allow-profile-mismatch to run anyway";
  const std::string kind = d.kind();
  if (kind == "none") return {"emulated", p->name + " emulated on the CPU: " + limits};

  const GpuInfo& g = d.gpus.front();
  if (kind == "vgpu") {
    const std::string has = "this VM's GPU is " + g.name + " (" +
                            (g.profile.empty() ? "a profile the catalog does not list" : "profile " + g.profile) + ")";
    if (!g.profile.empty() && lower(g.profile) == lower(p->name)) return {"real", p->name + ": " + has};
    return {"mismatch", "the point asks for " + p->name + " but " + has + mismatch_tail};
  }

  // A whole GPU: passthrough or bare metal.
  const std::string what = kind == "passthrough" ? "a GPU passed through whole to this VM" : "a bare-metal GPU";
  const std::string has = "GPU 0 (" + g.name + ") is " + what;
  if (p->whole_gpu()) {
    if (p->name == kind) return {"real", p->name + ": " + has};
    return {"mismatch", "the point asks for " + p->name + " but " + has + mismatch_tail};
  }
  std::string message = p->name + " emulated on " + what + " (" + g.name + "): " + limits;
  if (g.memory_mib > 0 && p->framebuffer_mib > g.memory_mib)
    message += "; the cap is above this GPU's " + std::to_string(g.memory_mib) + " MiB";
  return {"emulated", message};
}

}  // namespace ringbench::vgpu
