#include "runner/job/gpu.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "base/errors.h"
#include "models/network.h"
#include "ringbench/config.h"

#if RINGBENCH_HAVE_CUDA
#include <cuda_runtime.h>

#include "cuda/device.h"
#endif
#if RINGBENCH_HAVE_NCCL
#include "collectives/nccl_comm.h"
#endif

namespace ringbench {

bool built_with_cuda() { return RINGBENCH_HAVE_CUDA != 0; }
bool built_with_nccl() { return RINGBENCH_HAVE_NCCL != 0; }

namespace {

#if RINGBENCH_HAVE_CUDA
// This process's rank among the ranks on its machine.
int local_rank(const World& w) {
  for (const char* k : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                        "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char* v = std::getenv(k)) return std::max(0, std::atoi(v));
  // Ranks started by ringbench itself on this machine: local ranks, and the nodes of an
  // emulated cluster (network namespaces on one machine), which must not all land on GPU 0.
  if (w.launcher == "local" || w.launcher == "env" || w.launcher == "single" || w.launcher == "emulated")
    return w.rank;
  return 0;
}
#endif

}  // namespace

std::string gpu_unavailable_reason() {
#if RINGBENCH_HAVE_CUDA
  return cuda::unavailable_reason();
#else
  return "this ringbench was built without CUDA (configure with -DRINGBENCH_WITH_CUDA=ON)";
#endif
}

std::string nccl_unavailable_reason() {
#if RINGBENCH_HAVE_NCCL
  return gpu_unavailable_reason();
#else
  return "this ringbench was built without NCCL (configure with -DRINGBENCH_WITH_CUDA=ON "
         "-DRINGBENCH_WITH_NCCL=ON)";
#endif
}

int gpu_count() {
#if RINGBENCH_HAVE_CUDA
  int n = 0;
  if (!gpu_unavailable_reason().empty() || cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
#else
  return 0;
#endif
}

int use_local_gpu(const World& w) {
#if RINGBENCH_HAVE_CUDA
  if (const std::string why = gpu_unavailable_reason(); !why.empty()) throw Error(why);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) throw Error("no CUDA device");
  const int device = local_rank(w) % n;
  const cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess)
    throw Error("cudaSetDevice(" + std::to_string(device) + ") failed: " + cudaGetErrorName(e) + ": " +
                cudaGetErrorString(e));
  return device;
#else
  (void)w;
  throw Error(gpu_unavailable_reason());
#endif
}

nlohmann::json gpu_json(int device) {
#if RINGBENCH_HAVE_CUDA
  if (const std::string why = gpu_unavailable_reason(); !why.empty())
    return {{"available", false}, {"reason", why}};
  try {
    const bool in_use = device >= 0;
    if (!in_use && cudaGetDevice(&device) != cudaSuccess) device = 0;
    const cuda::GpuInfo g = cuda::gpu_info(device, in_use);
    const double mib = 1 << 20;
    return {{"available", true},
            {"device", g.device},
            {"name", g.name},
            {"pci_bus_id", g.pci_bus_id},
            {"compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)},
            {"multiprocessors", g.multiprocessors},
            {"memory_total_mib", double(g.total_bytes) / mib},
            {"in_use", in_use},
            {"memory_free_mib", in_use ? nlohmann::json(double(g.free_bytes) / mib) : nlohmann::json(nullptr)},
            {"driver_cuda", g.driver},
            {"runtime_cuda", g.runtime},
            {"cudnn", g.cudnn},
            {"cublas", g.cublas},
#if RINGBENCH_HAVE_NCCL
            {"nccl", nccl_version()}
#else
            {"nccl", "not built"}
#endif
    };
  } catch (const std::exception& e) {
    return {{"available", false}, {"reason", e.what()}};
  }
#else
  (void)device;
  return {{"available", false}, {"reason", gpu_unavailable_reason()}};
#endif
}

void release_gpu_context() {
#if RINGBENCH_HAVE_CUDA
  if (gpu_unavailable_reason().empty()) cudaDeviceReset();
#endif
}

std::string gpu_line(const nlohmann::json& g) {
  if (!g.value("available", false)) return "none (" + g.value("reason", std::string("unknown")) + ")";
  char mem[32];
  std::snprintf(mem, sizeof mem, "%.1f GiB", g.value("memory_total_mib", 0.0) / 1024);
  return g.value("name", std::string("?")) + " (device " + std::to_string(g.value("device", 0)) + ", " +
         g.value("pci_bus_id", std::string("?")) + ", cc " + g.value("compute_capability", std::string("?")) +
         ", " + mem + "), CUDA driver " + g.value("driver_cuda", std::string("?")) + " runtime " +
         g.value("runtime_cuda", std::string("?")) + ", cuDNN " + g.value("cudnn", std::string("?")) +
         ", cuBLAS " + g.value("cublas", std::string("?")) + ", NCCL " + g.value("nccl", std::string("?"));
}

void print_gpu_lines(const nlohmann::json& hosts) {
  std::vector<std::string> lines;
  for (const auto& h : hosts) lines.push_back(gpu_line(h.value("gpu", nlohmann::json::object())));
  if (lines.empty()) return;
  if (std::all_of(lines.begin(), lines.end(), [&](const std::string& l) { return l == lines[0]; })) {
    std::printf("# gpu%s: %s\n", lines.size() > 1 ? " (every rank)" : "", lines[0].c_str());
    return;
  }
  for (size_t i = 0; i < lines.size(); ++i)
    std::printf("#  rank %2d  gpu: %s\n", hosts[i].value("rank", int(i)), lines[i].c_str());
}

Placement place_compute(const std::string& device_option, const std::string& backend, bool needs_gpu) {
  const bool gpu_backend = backend == "cudnn", cpu_backend = backend != "auto" && !gpu_backend;
  std::string device = device_option;
  if (device == "auto") {
    if (gpu_backend || needs_gpu) device = "cuda";
    else if (cpu_backend) device = "cpu";
    else device = gpu_unavailable_reason().empty() ? "cuda" : "cpu";
  }
  if (device == "cuda") {
    if (cpu_backend)
      throw Error("--backend " + backend + " computes on the CPU: use --backend cudnn (or auto) with --device cuda");
    if (const std::string why = gpu_unavailable_reason(); !why.empty())
      throw Error((device_option == "cuda" ? "--device cuda: " : "--backend " + backend + " needs a GPU: ") + why);
  } else if (gpu_backend) {
    throw Error("--backend cudnn computes on the GPU: it needs --device cuda (or auto), not --device cpu");
  }
  if (backend != "auto") return {device, backend};
  return {device, device == "cuda" ? "cudnn" : models::available_backends().front()};
}

}  // namespace ringbench
