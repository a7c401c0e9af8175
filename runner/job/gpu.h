// The GPU a rank computes on (`train --device cuda`, `allreduce --impl nccl`), and what the run
// metadata says about it: the device, the driver's and runtime's CUDA, cuDNN, cuBLAS and NCCL
// versions, its memory, or the reason there is none. Compiles without CUDA (then there is none).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "runner/job/world.h"

namespace ringbench {

// Whether this ringbench was built with CUDA (RINGBENCH_WITH_CUDA) and with NCCL.
bool built_with_cuda();
bool built_with_nccl();
// Empty when this ringbench can compute on a CUDA device here; else why not: not built with
// CUDA, or cuda::unavailable_reason() (no device, no driver).
std::string gpu_unavailable_reason();
// Empty when NCCL can run here; else why not: not built with NCCL, or no GPU (as above).
std::string nccl_unavailable_reason();

// Where a command computes, from --device (cpu, cuda or auto) and --backend (auto, cudnn or a CPU
// backend): the device and the backend. `needs_gpu`: something else (a transport that reduces
// GPU buffers) needs the GPU, so auto means cuda. What cannot run here is an Error saying why.
struct Placement {
  std::string device, backend;
};
Placement place_compute(const std::string& device, const std::string& backend, bool needs_gpu = false);

// CUDA devices usable here (0 without CUDA or a device).
int gpu_count();

// Makes this rank's device current and returns its index: the rank's local rank on its machine
// (mpirun's local rank, or the rank when every rank runs here) modulo the visible devices.
// Throws Error with gpu_unavailable_reason() when there is none.
int use_local_gpu(const World& w);

// The device `device` for metadata: {"available": true, "device", "name", "pci_bus_id",
// "compute_capability", "multiprocessors", "in_use", "memory_total_mib", "memory_free_mib",
// "driver_cuda", "runtime_cuda", "cudnn", "cublas", "nccl"}, or {"available": false, "reason"}.
// Never throws. device >= 0: this process's device (current, free memory read); -1: the
// current one, described without creating a context on it (memory_free_mib null).
nlohmann::json gpu_json(int device = -1);
// Destroys this process's context on the current device (cudaDeviceReset): for a process that
// described the GPU but computes nothing on it (the sweep driver), so its points get the memory.
void release_gpu_context();
// One line of it for the `#` headers: "NVIDIA H100 80GB HBM3 (device 0, 0000:3B:00.0, cc 9.0,
// 79.2 GiB), CUDA driver 13.0 runtime 13.0, cuDNN 9.13.0, cuBLAS 13.1.0, NCCL 2.28.9" or
// "none (reason)".
std::string gpu_line(const nlohmann::json& g);
// The `#` header lines of the ranks' GPUs (`hosts`: every rank's metadata with its "gpu"): one
// line when all ranks say the same ("# gpu: none (...)"), else one per rank.
void print_gpu_lines(const nlohmann::json& hosts);

}  // namespace ringbench
