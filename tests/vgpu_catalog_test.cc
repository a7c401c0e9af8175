// The vGPU catalog (the built-in data and the strict loader), vGPU names as guest drivers report
// them, `nvidia-smi -q` parsing, and how a sweep point's profile relates to the machine.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/errors.h"
#include "vgpu/catalog.h"
#include "vgpu/detect.h"

namespace ringbench::vgpu {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---- the built-in catalog ----

TEST(VgpuCatalog, BuiltinLoads) {
  const Catalog& c = Catalog::builtin();
  EXPECT_EQ(c.origin(), "built-in");
  EXPECT_TRUE(contains(c.source(), "https://docs.nvidia.com/grid/8.0/grid-vgpu-user-guide/")) << c.source();
  EXPECT_TRUE(contains(c.source(), "https://docs.nvidia.com/ai-enterprise/")) << c.source();
  for (const char* model : {"P40", "T4", "V100", "V100X", "V100D", "V100DX", "A100", "A100X", "A100D", "A100DX"}) {
    SCOPED_TRACE(model);
    const GpuModel* g = c.gpu(model);
    ASSERT_NE(g, nullptr);
    EXPECT_FALSE(c.profiles_of(model).empty());
    ASSERT_FALSE(g->boards.empty());
    EXPECT_EQ(g->board, g->boards.front());
    EXPECT_FALSE(g->description.empty());
  }
  EXPECT_EQ(&Catalog::builtin(), &c);  // parsed once
}

struct Fact {
  const char* name;
  const char* gpu;
  int64_t framebuffer_mib;
  int max_instances;
  const char* series;
};

// Numbers checked by hand against NVIDIA's tables (configs/vgpu-profiles.yaml cites them).
TEST(VgpuCatalog, DocumentedFacts) {
  const std::vector<Fact> facts{
      {"P40-1Q", "P40", 1024, 24, "Q"},
      {"P40-24Q", "P40", 24576, 1, "Q"},
      {"P40-8Q", "P40", 8192, 3, "Q"},
      {"P40-2B4", "P40", 2048, 12, "B"},
      {"P40-3A", "P40", 3072, 8, "A"},
      {"T4-1Q", "T4", 1024, 16, "Q"},
      {"T4-16Q", "T4", 16384, 1, "Q"},
      {"T4-4C", "T4", 4096, 4, "C"},
      {"T4-16C", "T4", 16384, 1, "C"},
      {"V100-16C", "V100", 16384, 1, "C"},
      {"V100X-1B", "V100X", 1024, 16, "B"},
      {"V100D-32Q", "V100D", 32768, 1, "Q"},
      {"V100D-4C", "V100D", 4096, 8, "C"},
      {"V100DX-32C", "V100DX", 32768, 1, "C"},
      {"A100-40C", "A100", 40960, 1, "C"},
      {"A100-4C", "A100", 4096, 10, "C"},
      {"A100-1-5C", "A100", 5120, 7, "MIG-C"},
      {"A100-7-40C", "A100", 40960, 1, "MIG-C"},
      {"A100-3-20C", "A100", 20480, 2, "MIG-C"},
      {"A100X-2-10C", "A100X", 10240, 3, "MIG-C"},
      {"A100D-80C", "A100D", 81920, 1, "C"},
      {"A100D-16C", "A100D", 16384, 5, "C"},
      {"A100D-1-10C", "A100D", 10240, 7, "MIG-C"},
      {"A100DX-4C", "A100DX", 4096, 20, "C"},
  };
  for (const auto& f : facts) {
    SCOPED_TRACE(f.name);
    const Profile* p = Catalog::builtin().find(f.name);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->name, f.name);
    EXPECT_EQ(p->gpu, f.gpu);
    EXPECT_EQ(p->framebuffer_mib, f.framebuffer_mib);
    EXPECT_EQ(p->max_instances, f.max_instances);
    EXPECT_EQ(p->series, f.series);
    EXPECT_EQ(p->time_sliced, std::string(f.series) != "MIG-C");
    EXPECT_FALSE(p->whole_gpu());
  }
  // Left out on purpose (see the file's header): no documented count, or a documented typo.
  EXPECT_EQ(Catalog::builtin().find("P40-24C"), nullptr);
  EXPECT_EQ(Catalog::builtin().find("V100DX-4C"), nullptr);
}

TEST(VgpuCatalog, WholeGpuEntries) {
  for (const char* name : {"passthrough", "bare-metal"}) {
    SCOPED_TRACE(name);
    const Profile* p = Catalog::builtin().find(name);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->series, name);
    EXPECT_TRUE(p->whole_gpu());
    EXPECT_EQ(p->gpu, "");
    EXPECT_EQ(p->framebuffer_mib, 0);
    EXPECT_EQ(p->max_instances, 1);
    EXPECT_FALSE(p->time_sliced);
  }
}

// One GPU's vGPUs of one type fit in its memory; names carry their GPU's prefix.
TEST(VgpuCatalog, EveryProfileFitsItsGpu) {
  const Catalog& c = Catalog::builtin();
  int n = 0;
  for (const auto& p : c.profiles()) {
    if (p.whole_gpu()) continue;
    SCOPED_TRACE(p.name);
    const GpuModel* g = c.gpu(p.gpu);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(p.name.rfind(g->model + "-", 0), 0u);
    EXPECT_GE(p.max_instances, 1);
    EXPECT_LE(p.framebuffer_mib * p.max_instances, g->memory_mib);
    EXPECT_EQ(p.time_sliced, p.series != "MIG-C");
    EXPECT_EQ(profile_from_device_name("GRID " + p.name), p.name);  // a guest's name parses back
    ++n;
  }
  EXPECT_GT(n, 100);
}

TEST(VgpuCatalog, FindIsExactAndCaseInsensitive) {
  const Catalog& c = Catalog::builtin();
  ASSERT_NE(c.find("t4-4c"), nullptr);
  EXPECT_EQ(c.find("t4-4c")->name, "T4-4C");
  EXPECT_EQ(c.find("Bare-Metal")->name, "bare-metal");
  EXPECT_EQ(c.find("T4-4"), nullptr);
  EXPECT_EQ(c.find("T4-4CX"), nullptr);
  EXPECT_EQ(c.find("GRID T4-4C"), nullptr);
  EXPECT_EQ(c.find(""), nullptr);
  EXPECT_EQ(c.gpu("a100d")->model, "A100D");
  EXPECT_EQ(c.gpu("A100-40GB"), nullptr);
}

TEST(VgpuCatalog, BoardNames) {
  const Catalog& c = Catalog::builtin();
  auto model = [&](const std::string& board) {
    const GpuModel* g = c.gpu_for_board(board);
    return g == nullptr ? std::string("-") : g->model;
  };
  EXPECT_EQ(model("Tesla T4"), "T4");
  EXPECT_EQ(model("Tesla P40"), "P40");
  EXPECT_EQ(model("Tesla V100-PCIE-16GB"), "V100");
  EXPECT_EQ(model("Tesla V100-SXM2-32GB"), "V100DX");
  EXPECT_EQ(model("NVIDIA A100-PCIE-40GB"), "A100");
  EXPECT_EQ(model("NVIDIA A100-SXM4-40GB"), "A100X");
  EXPECT_EQ(model("A100-SXM4-40GB"), "A100X");  // older drivers
  EXPECT_EQ(model("nvidia a100 80gb pcie"), "A100D");
  EXPECT_EQ(model("NVIDIA A100-SXM4-80GB"), "A100DX");
  EXPECT_EQ(model("NVIDIA H100 80GB HBM3"), "-");
  EXPECT_EQ(model("GRID T4-4C"), "-");
}

TEST(VgpuCatalog, UnknownProfileMessage) {
  const Catalog& c = Catalog::builtin();
  const std::string t4 = c.unknown_profile_message("T4-3C");
  EXPECT_EQ(t4.rfind("unknown vGPU profile 'T4-3C'; T4 has T4-16Q, ", 0), 0u) << t4;
  EXPECT_TRUE(contains(t4, "T4-4C")) << t4;
  EXPECT_TRUE(contains(t4, "ringbench vgpu profiles")) << t4;
  EXPECT_FALSE(contains(t4, "P40-1Q")) << t4;
  EXPECT_TRUE(contains(c.unknown_profile_message("a100d-3c"), "A100D has A100D-80C"))
      << c.unknown_profile_message("a100d-3c");

  const std::string other = c.unknown_profile_message("X9-1Q");
  EXPECT_EQ(other.rfind("unknown vGPU profile 'X9-1Q'; ", 0), 0u) << other;
  for (const char* part : {"P40", "T4", "A100DX", "passthrough", "bare-metal", "run `ringbench vgpu profiles`"})
    EXPECT_TRUE(contains(other, part)) << part << " not in: " << other;
}

// ---- the loader ----

const std::string kSmall = R"(
source: a test
gpus:
  - model: X4
    description: Test X4
    boards: ["Test X4"]
    memory_mib: 4096
    profiles:
      - [X4-1Q, 1024, 4, Q]
      - [X4-2C, 2048, 2, C]
      - [X4-1-2C, 2048, 2, MIG-C]
whole_gpu: [passthrough, bare-metal]
)";

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// The error of parsing `yaml`, or "" when it parses.
std::string error_of(const std::string& yaml) {
  try {
    Catalog::parse(yaml, "test.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& yaml, const std::string& message_start) {
  const std::string e = error_of(yaml);
  EXPECT_EQ(e.rfind(message_start, 0), 0u) << "expected '" << message_start << "...', got '" << e << "' for:\n" << yaml;
}

TEST(VgpuCatalog, ParsesAValidFile) {
  const Catalog c = Catalog::parse(kSmall, "test.yaml");
  EXPECT_EQ(c.origin(), "test.yaml");
  EXPECT_EQ(c.source(), "a test");
  ASSERT_EQ(c.gpus().size(), 1u);
  EXPECT_EQ(c.gpus()[0].board, "Test X4");
  ASSERT_EQ(c.profiles().size(), 5u);
  EXPECT_EQ(c.profiles()[0].name, "X4-1Q");
  EXPECT_EQ(c.profiles()[2].name, "X4-1-2C");
  EXPECT_FALSE(c.profiles()[2].time_sliced);
  EXPECT_EQ(c.profiles()[3].name, "passthrough");
  EXPECT_EQ(c.profiles()[4].name, "bare-metal");
  EXPECT_EQ(c.unknown_profile_message("X4-3Q"),
            "unknown vGPU profile 'X4-3Q'; X4 has X4-1Q, X4-2C, X4-1-2C (see `ringbench vgpu profiles`)");
}

TEST(VgpuCatalog, LoaderErrorsNameTheKey) {
  // Whole files.
  expect_error("", "test.yaml: the file: must be a mapping");
  expect_error("gpus: [", "test.yaml: not valid YAML");
  expect_error(kSmall + "colour: red\n", "test.yaml: colour: unknown key; allowed here: source, gpus, whole_gpu");
  expect_error(kSmall + "source: again\n", "test.yaml: source: given twice");

  // kSmall with one edit, `from` replaced by `to`, and the error it makes.
  struct Edit {
    const char* from;
    const char* to;
    const char* error;
  };
  const Edit edits[] = {
      // Structure and keys.
      {"    memory_mib: 4096\n", "    memory_mib: 4096\n    colour: red\n",
       "test.yaml: gpus[0].colour: unknown key; allowed here: model, description, boards, memory_mib, profiles"},
      {"    memory_mib: 4096\n", "",
       "test.yaml: gpus[0].memory_mib: missing"},
      {"source: a test\n", "",
       "test.yaml: source: missing"},
      {"memory_mib: 4096", "memory_mib: 0",
       "test.yaml: gpus[0].memory_mib: must be >= 1 (got 0)"},
      {"memory_mib: 4096", "memory_mib: lots",
       "test.yaml: gpus[0].memory_mib: must be an integer (got 'lots')"},
      {"model: X4", "model: 4X",
       "test.yaml: gpus[0].model: '4X' is not a model key"},
      {"boards: [\"Test X4\"]", "boards: []",
       "test.yaml: gpus[0].boards: must be a non-empty list"},
      {"gpus:\n", "gpus: []\nx:\n",
       "test.yaml: x: unknown key"},
      {"    profiles:\n", "    profiles: []\n    x:\n",
       "test.yaml: gpus[0].x: unknown key"},
      // Rows.
      {"[X4-1Q, 1024, 4, Q]", "[X4-1Q, 1024, 0, Q]",
       "test.yaml: gpus[0].profiles[0]: max instances must be >= 1 (got 0)"},
      {"[X4-2C, 2048, 2, C]", "[X4-2C, -2048, 2, C]",
       "test.yaml: gpus[0].profiles[1]: framebuffer must be >= 1 MiB (got -2048)"},
      {"[X4-2C, 2048, 2, C]", "[X4-2C, 2 GB, 2, C]",
       "test.yaml: gpus[0].profiles[1]: framebuffer (MiB, 2nd item) must be an integer (got '2 GB')"},
      {"[X4-2C, 2048, 2, C]", "[X4-2C, 2048, 2]",
       "test.yaml: gpus[0].profiles[1]: must be a row [name, framebuffer_mib, max_instances, series] (got 3 items)"},
      {"[X4-2C, 2048, 2, C]", "{name: X4-2C, framebuffer_mib: 2048}",
       "test.yaml: gpus[0].profiles[1]: must be a row [name, framebuffer_mib, max_instances, series] (got a mapping)"},
      {"[X4-2C, 2048, 2, C]", "[X4-2C, 2048, 2, D]",
       "test.yaml: gpus[0].profiles[1]: series must be one of Q, B, A, C, MIG-C (got 'D')"},
      {"[X4-2C, 2048, 2, C]", "[x4-1q, 2048, 2, Q]",
       "test.yaml: gpus[0].profiles[1]: name 'x4-1q' is not a vGPU type of X4"},
      {"[X4-2C, 2048, 2, C]", "[X4-1Q, 1024, 2, Q]",
       "test.yaml: gpus[0].profiles[1]: duplicate profile 'X4-1Q' (also gpus[0].profiles[0])"},
      {"[X4-2C, 2048, 2, C]", "[T4-2C, 2048, 2, C]",
       "test.yaml: gpus[0].profiles[1]: name 'T4-2C' is not a vGPU type of X4"},
      {"[X4-2C, 2048, 2, C]", "[X4-2C, 2048, 2, Q]",
       "test.yaml: gpus[0].profiles[1]: name 'X4-2C' does not match series Q"},
      {"[X4-1-2C, 2048, 2, MIG-C]", "[X4-1-2C, 2048, 2, C]",
       "test.yaml: gpus[0].profiles[2]: name 'X4-1-2C' does not match series C"},
      {"[X4-2C, 2048, 2, C]", "[X4-2C, 2048, 3, C]",
       "test.yaml: gpus[0].profiles[1]: framebuffer x max instances = 2048 x 3 MiB exceeds X4's 4096 MiB"},
      // The whole-GPU entries.
      {"[passthrough, bare-metal]", "[passthrough, bare]",
       "test.yaml: whole_gpu[1]: 'bare' is not one of: passthrough, bare-metal"},
      {"[passthrough, bare-metal]", "[passthrough, passthrough]",
       "test.yaml: whole_gpu[1]: duplicate entry 'passthrough' (also whole_gpu[0])"},
      {"[passthrough, bare-metal]", "[passthrough]",
       "test.yaml: whole_gpu: must list passthrough and bare-metal (bare-metal is missing)"},
  };
  for (const Edit& e : edits) expect_error(replaced(kSmall, e.from, e.to), e.error);

  // Across GPUs.
  const std::string second =
      "  - {model: Y4, description: Y, boards: [\"Test Y4\"], memory_mib: 1024, profiles: [[Y4-1Q, 1024, 1, Q]]}\n";
  EXPECT_EQ(error_of(replaced(kSmall, "whole_gpu:", second + "whole_gpu:")), "");
  expect_error(replaced(kSmall, "whole_gpu:", replaced(second, "model: Y4", "model: x4") + "whole_gpu:"),
               "test.yaml: gpus[1].model: duplicate model 'x4' (also gpus[0].model)");
  expect_error(replaced(kSmall, "whole_gpu:", replaced(second, "Test Y4", "NVIDIA Test X4") + "whole_gpu:"),
               "test.yaml: gpus[1].boards[0]: duplicate board 'NVIDIA Test X4' (also gpus[0].boards[0])");
}

TEST(VgpuCatalog, LoadReadsAFile) {
  try {
    Catalog::load("/nonexistent/vgpu-profiles.yaml");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("cannot read the vGPU catalog /nonexistent/vgpu-profiles.yaml: ", 0), 0u)
        << e.what();
  }
}

// ---- vGPU names as guest drivers report them ----

TEST(VgpuDeviceName, ProfilesOfGuestVgpus) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"GRID T4-4C", "T4-4C"},
      {"GRID P40-24Q", "P40-24Q"},
      {"NVIDIA A100-4C", "A100-4C"},
      {"NVIDIA A100-1-5C", "A100-1-5C"},
      {"NVIDIA A100D-80C", "A100D-80C"},
      {"GRID V100D-32Q", "V100D-32Q"},
      {"T4-8C", "T4-8C"},
      {"GRID P40-2B4", "P40-2B4"},
      {"NVIDIA A100D-1-10CME", "A100D-1-10CME"},
      {"  GRID T4-4C\n", "T4-4C"},
      {"NVIDIA RTXA5000-8Q", "RTXA5000-8Q"},  // not in the catalog: still a vGPU
  };
  for (const auto& [name, profile] : cases) EXPECT_EQ(profile_from_device_name(name), profile) << name;
}

TEST(VgpuDeviceName, BoardsAreNotProfiles) {
  for (const char* name : {"Tesla T4",
                           "T4",
                           "Tesla P40",
                           "NVIDIA A100-SXM4-40GB",
                           "NVIDIA A100-PCIE-40GB",
                           "A100-SXM4-80GB",
                           "NVIDIA A100 80GB PCIe",
                           "Tesla V100-PCIE-16GB",
                           "Tesla V100S-PCIE-32GB",
                           "NVIDIA H100 80GB HBM3",
                           "NVIDIA GeForce RTX 3090",
                           "A100-40GB",
                           "",
                           "GRID",
                           "NVIDIA ",
                           "T4-C",
                           "T4-4",
                           "-4C",
                           "4-4C",
                           "T4-4C-",
                           "T4--4C"})
    EXPECT_EQ(profile_from_device_name(name), std::nullopt) << "'" << name << "'";
}

// ---- nvidia-smi -q ----

// How `nvidia-smi -q` starts (R535 and R550 alike), up to "Attached GPUs : n" (no line end: the GPUs follow).
std::string smi_preamble(const std::string& timestamp, const std::string& driver, const std::string& cuda, int gpus) {
  auto line = [](const std::string& name, const std::string& value) {
    return "\n" + name + std::string(42 - name.size(), ' ') + ": " + value;
  };
  return "\n==============NVSMI LOG==============\n" + line("Timestamp", timestamp) + line("Driver Version", driver) +
         line("CUDA Version", cuda) + "\n" + line("Attached GPUs", std::to_string(gpus));
}

// A Linux VM with a T4-4C vGPU (vGPU 16, R535 guest driver), abridged: every section that could
// confuse a parser stays (a second "Product Name", a second "Total").
const std::string kSmiVgpuGuest = smi_preamble("Tue Mar  5 10:12:44 2024", "535.129.03", "12.2", 1) + R"(
GPU 00000000:02:00.0
    Product Name                          : GRID T4-4C
    Product Brand                         : NVIDIA Virtual Compute Server
    Product Architecture                  : Turing
    Display Mode                          : Enabled
    Persistence Mode                      : Enabled
    MIG Mode
        Current                           : N/A
        Pending                           : N/A
    GPU UUID                              : GPU-4b1c2a9e-0d3f-11ef-9a6c-7e1f7c3d2a10
    GPU Virtualization Mode
        Virtualization Mode               : VGPU
        Host VGPU Mode                    : N/A
    vGPU Software Licensed Product
        Product Name                      : NVIDIA Virtual Compute Server
        License Status                    : Licensed (Expiry: 2024-4-5 10:2:11 GMT)
    PCI
        Bus                               : 0x02
        Bus Id                            : 00000000:02:00.0
    FB Memory Usage
        Total                             : 4096 MiB
        Reserved                          : 308 MiB
        Used                              : 0 MiB
        Free                              : 3787 MiB
    BAR1 Memory Usage
        Total                             : 256 MiB
        Used                              : 1 MiB
        Free                              : 255 MiB
    Compute Mode                          : Default
    Processes                             : None
)";

// Two A100 SXM4 40GB on bare metal (R550), the first in MIG mode, abridged.
const std::string kSmiBareMetalA100 = smi_preamble("Wed Nov 13 22:10:05 2024", "550.127.05", "12.4", 2) + R"(
GPU 00000000:07:00.0
    Product Name                          : NVIDIA A100-SXM4-40GB
    Product Brand                         : NVIDIA
    Product Architecture                  : Ampere
    MIG Mode
        Current                           : Enabled
        Pending                           : Enabled
    MIG Devices
        MIG Device
            Index                         : 0
            GPU Instance ID               : 1
            Compute Instance ID           : 0
            FB Memory Usage
                Total                     : 4864 MiB
                Reserved                  : 0 MiB
            BAR1 Memory Usage
                Total                     : 8191 MiB
    GPU Virtualization Mode
        Virtualization Mode               : None
        Host VGPU Mode                    : N/A
        vGPU Heterogeneous Mode           : N/A
    FB Memory Usage
        Total                             : 40960 MiB
        Reserved                          : 597 MiB
        Used                              : 0 MiB
        Free                              : 40362 MiB
    BAR1 Memory Usage
        Total                             : 65536 MiB

GPU 00000000:46:00.0
    Product Name                          : NVIDIA A100-SXM4-40GB
    Product Brand                         : NVIDIA
    GPU Virtualization Mode
        Virtualization Mode               : None
        Host VGPU Mode                    : N/A
    FB Memory Usage
        Total                             : 40960 MiB
        Reserved                          : 597 MiB
)";

// A T4 passed through whole to a VM (R470), abridged; CRLF line ends as a Windows-edited copy.
const std::string kSmiPassthroughT4 =
    "==============NVSMI LOG==============\r\n\r\n"
    "Driver Version                            : 470.223.02\r\n"
    "Attached GPUs                             : 1\r\n"
    "GPU 00000000:00:1E.0\r\n"
    "    Product Name                          : Tesla T4\r\n"
    "    GPU Virtualization Mode\r\n"
    "        Virtualization Mode               : Pass-Through\r\n"
    "        Host VGPU Mode                    : N/A\r\n"
    "    FB Memory Usage\r\n"
    "        Total                             : 15109 MiB\r\n"
    "        Used                              : 0 MiB\r\n";

// What parse_nvidia_smi_q found, field by field: the driver, every GPU, the kind and the note.
void expect_detection(const Detection& d, const std::string& driver, const std::vector<GpuInfo>& gpus,
                      const std::string& kind, const std::string& note) {
  EXPECT_EQ(d.driver_version, driver);
  ASSERT_EQ(d.gpus.size(), gpus.size());
  for (size_t i = 0; i < gpus.size(); ++i) {
    SCOPED_TRACE("GPU " + std::to_string(i));
    EXPECT_EQ(d.gpus[i].index, gpus[i].index);
    EXPECT_EQ(d.gpus[i].name, gpus[i].name);
    EXPECT_EQ(d.gpus[i].memory_mib, gpus[i].memory_mib);
    EXPECT_EQ(d.gpus[i].virtualization, gpus[i].virtualization);
    EXPECT_EQ(d.gpus[i].profile, gpus[i].profile);
  }
  EXPECT_EQ(d.kind(), kind);
  EXPECT_EQ(d.note, note);
}

TEST(VgpuNvidiaSmi, VgpuGuest) {
  const Detection d = parse_nvidia_smi_q(kSmiVgpuGuest);
  EXPECT_EQ(d.source, "nvidia-smi");
  expect_detection(d, "535.129.03", {{0, "GRID T4-4C", 4096, "vgpu", "T4-4C"}}, "vgpu", "");
}

TEST(VgpuNvidiaSmi, BareMetal) {
  const GpuInfo a100{0, "NVIDIA A100-SXM4-40GB", 40960, "none", "bare-metal"};
  GpuInfo second = a100;
  second.index = 1;
  expect_detection(parse_nvidia_smi_q(kSmiBareMetalA100), "550.127.05", {a100, second}, "bare-metal", "");
}

TEST(VgpuNvidiaSmi, Passthrough) {
  expect_detection(parse_nvidia_smi_q(kSmiPassthroughT4), "470.223.02",
                   {{0, "Tesla T4", 15109, "passthrough", "passthrough"}}, "passthrough", "");
}

TEST(VgpuNvidiaSmi, UnusualOutputs) {
  {  // a vGPU the catalog does not list
    const Detection d = parse_nvidia_smi_q(replaced(kSmiVgpuGuest, "GRID T4-4C", "NVIDIA RTXA5000-8Q"));
    ASSERT_EQ(d.gpus.size(), 1u);
    EXPECT_EQ(d.gpus[0].virtualization, "vgpu");
    EXPECT_EQ(d.gpus[0].profile, "");
    EXPECT_EQ(d.kind(), "vgpu");
    EXPECT_TRUE(contains(d.note, "vGPU of profile RTXA5000-8Q, which the catalog (built-in) does not list")) << d.note;
  }
  {  // no virtualization section (old drivers): the name tells a vGPU
    const Detection d = parse_nvidia_smi_q(
        "Driver Version : 430.30\nGPU 00000000:0B:00.0\n    Product Name : GRID P40-2Q\n    FB Memory Usage\n"
        "        Total : 2048 MiB\n");
    ASSERT_EQ(d.gpus.size(), 1u);
    EXPECT_EQ(d.gpus[0].virtualization, "vgpu");
    EXPECT_EQ(d.gpus[0].profile, "P40-2Q");
    EXPECT_EQ(d.gpus[0].memory_mib, 2048);
  }
  {  // ... and not one: a board of unknown mode counts as bare metal, and says so
    const Detection d = parse_nvidia_smi_q("GPU 00000000:0B:00.0\n    Product Name : Tesla P40\n");
    ASSERT_EQ(d.gpus.size(), 1u);
    EXPECT_EQ(d.gpus[0].virtualization, "unknown");
    EXPECT_EQ(d.gpus[0].profile, "bare-metal");
    EXPECT_EQ(d.kind(), "bare-metal");
    EXPECT_TRUE(contains(d.note, "virtualization mode unknown")) << d.note;
  }
  {  // a hypervisor's own GPU
    const Detection d = parse_nvidia_smi_q(replaced(kSmiPassthroughT4, "Pass-Through", "Host VGPU"));
    ASSERT_EQ(d.gpus.size(), 1u);
    EXPECT_EQ(d.gpus[0].virtualization, "host_vgpu");
    EXPECT_EQ(d.kind(), "bare-metal");
    EXPECT_TRUE(contains(d.note, "vGPU hypervisor")) << d.note;
  }
  {  // a MIG device's memory, listed after the GPU's, is not the GPU's
    const Detection d = parse_nvidia_smi_q(
        "GPU 00000000:07:00.0\n    Product Name : NVIDIA A100-SXM4-40GB\n    FB Memory Usage\n"
        "        Total : 40960 MiB\n    MIG Devices\n        MIG Device\n            FB Memory Usage\n"
        "                Total : 4864 MiB\n    Compute Mode : Default\n");
    ASSERT_EQ(d.gpus.size(), 1u);
    EXPECT_EQ(d.gpus[0].memory_mib, 40960);
  }
  {  // the driver is there but no device is
    const Detection d = parse_nvidia_smi_q("No devices were found\n");
    EXPECT_TRUE(d.gpus.empty());
    EXPECT_EQ(d.kind(), "none");
    EXPECT_EQ(d.note, "nvidia-smi -q lists no GPU");
  }
}

TEST(VgpuDetect, ToJson) {
  const nlohmann::json j = to_json(parse_nvidia_smi_q(kSmiVgpuGuest));
  EXPECT_EQ(j.at("source"), "nvidia-smi");
  EXPECT_EQ(j.at("driver"), "535.129.03");
  EXPECT_EQ(j.at("kind"), "vgpu");
  EXPECT_EQ(j.at("note"), "");
  ASSERT_EQ(j.at("gpus").size(), 1u);
  const nlohmann::json& g = j.at("gpus")[0];
  EXPECT_EQ(g.at("index"), 0);
  EXPECT_EQ(g.at("name"), "GRID T4-4C");
  EXPECT_EQ(g.at("memory_mib"), 4096);
  EXPECT_EQ(g.at("virtualization"), "vgpu");
  EXPECT_EQ(g.at("profile"), "T4-4C");
}

// This machine: without a driver the answer is "none", with one it is consistent.
TEST(VgpuDetect, ThisMachine) {
  Detection d;
  ASSERT_NO_THROW(d = detect_gpus());
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  const bool driver = nvml != nullptr || std::system("command -v nvidia-smi >/dev/null 2>&1") == 0;
  if (nvml != nullptr) dlclose(nvml);
  if (!driver) {
    EXPECT_EQ(d.source, "none");
    EXPECT_EQ(d.kind(), "none");
    EXPECT_TRUE(d.gpus.empty());
    EXPECT_EQ(
        d.note,
        "no NVIDIA driver (libnvidia-ml.so.1 not found, nvidia-smi not on PATH): profiles are emulated on the CPU");
  } else {
    EXPECT_NE(d.source, "");
    for (const auto& g : d.gpus) EXPECT_FALSE(g.name.empty());
  }
  EXPECT_EQ(to_json(d).at("kind"), d.kind());
}

// ---- how a point's profile relates to the machine ----

Detection no_gpu() {
  Detection d;
  d.source = "none";
  return d;
}

// match_profile(wanted, d) gives this mode and exactly this message.
::testing::AssertionResult matches(const std::string& wanted, const Detection& d, const std::string& mode,
                                   const std::string& message) {
  const ProfileMatch m = match_profile(wanted, d);
  if (m.mode == mode && m.message == message) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << wanted << " gives mode '" << m.mode << "', message '" << m.message
                                       << "'; expected '" << mode << "', '" << message << "'";
}

TEST(VgpuMatch, NoneAndUnknown) {
  for (const Detection& d : {no_gpu(), parse_nvidia_smi_q(kSmiVgpuGuest), parse_nvidia_smi_q(kSmiBareMetalA100)}) {
    EXPECT_EQ(match_profile("none", d).mode, "none");
    try {
      match_profile("T4-3C", d);
      FAIL() << "T4-3C accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("unknown vGPU profile 'T4-3C'; T4 has ", 0), 0u) << e.what();
    }
  }
}

TEST(VgpuMatch, WithoutAGpuEverythingIsEmulated) {
  const Detection d = no_gpu();
  EXPECT_TRUE(matches("T4-4C", d, "emulated",
                      "T4-4C emulated on the CPU: framebuffer cap 4096 MiB, time slicing by ringbench"));
  EXPECT_TRUE(matches("a100-1-5c", d, "emulated",
                      "A100-1-5C emulated on the CPU: framebuffer cap 5120 MiB, a MIG slice of its own "
                      "(no time slicing)"));
  for (const char* whole : {"bare-metal", "passthrough"})
    EXPECT_TRUE(matches(whole, d, "emulated", std::string(whole) + " emulated on the CPU: no framebuffer cap"));
}

TEST(VgpuMatch, AVgpuVmMatchesOnlyItsOwnProfile) {
  const Detection d = parse_nvidia_smi_q(kSmiVgpuGuest);
  EXPECT_EQ(match_profile("T4-4C", d).mode, "real");
  EXPECT_EQ(match_profile("t4-4c", d).mode, "real");
  EXPECT_TRUE(matches("T4-8C", d, "mismatch",
                      "the point asks for T4-8C but this VM's GPU is GRID T4-4C (profile T4-4C); pass "
                      "--allow-profile-mismatch to run anyway"));
  EXPECT_EQ(match_profile("A100-4C", d).mode, "mismatch");
  EXPECT_EQ(match_profile("bare-metal", d).mode, "mismatch");
  EXPECT_EQ(match_profile("passthrough", d).mode, "mismatch");

  const Detection unlisted = parse_nvidia_smi_q(replaced(kSmiVgpuGuest, "GRID T4-4C", "NVIDIA RTXA5000-8Q"));
  const ProfileMatch m = match_profile("T4-4C", unlisted);
  EXPECT_EQ(m.mode, "mismatch");
  EXPECT_TRUE(contains(m.message, "this VM's GPU is NVIDIA RTXA5000-8Q (a profile the catalog does not list)"))
      << m.message;
}

TEST(VgpuMatch, PassthroughEmulatesVgpuProfiles) {
  const Detection d = parse_nvidia_smi_q(kSmiPassthroughT4);
  EXPECT_EQ(match_profile("passthrough", d).mode, "real");
  EXPECT_TRUE(matches("bare-metal", d, "mismatch",
                      "the point asks for bare-metal but GPU 0 (Tesla T4) is a GPU passed through whole to this VM; "
                      "pass --allow-profile-mismatch to run anyway"));
  EXPECT_TRUE(matches("T4-4C", d, "emulated",
                      "T4-4C emulated on a GPU passed through whole to this VM (Tesla T4): framebuffer cap 4096 MiB, "
                      "time slicing by ringbench"));
  const ProfileMatch big = match_profile("A100-40C", d);
  EXPECT_EQ(big.mode, "emulated");
  EXPECT_TRUE(contains(big.message, "; the cap is above this GPU's 15109 MiB")) << big.message;
}

TEST(VgpuMatch, BareMetalEmulatesVgpuProfiles) {
  const Detection d = parse_nvidia_smi_q(kSmiBareMetalA100);
  EXPECT_EQ(match_profile("bare-metal", d).mode, "real");
  const ProfileMatch pt = match_profile("passthrough", d);
  EXPECT_EQ(pt.mode, "mismatch");
  EXPECT_TRUE(contains(pt.message, "is a bare-metal GPU; pass --allow-profile-mismatch")) << pt.message;
  EXPECT_TRUE(matches("A100X-1-5C", d, "emulated",
                      "A100X-1-5C emulated on a bare-metal GPU (NVIDIA A100-SXM4-40GB): framebuffer cap 5120 MiB, a "
                      "MIG slice of its own (no time slicing)"));
}

}  // namespace
}  // namespace ringbench::vgpu
