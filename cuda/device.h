// The GPU this process computes on: whether there is one, and what it is, for run metadata.
#pragma once

#include <cstddef>
#include <string>

namespace ringbench::cuda {

// Empty when a CUDA device is usable; else why not ("no CUDA device: ..."), for skipped tests
// and for `--device auto` falling back to the CPU.
std::string unavailable_reason();

struct GpuInfo {
  int device = 0;
  std::string name;          // "NVIDIA H100 80GB HBM3"
  std::string pci_bus_id;    // "0000:3B:00.0"
  int cc_major = 0, cc_minor = 0;
  size_t total_bytes = 0, free_bytes = 0;
  int multiprocessors = 0;
  std::string driver;        // CUDA version the driver supports, "13.0"
  std::string runtime;       // CUDA runtime linked, "13.0"
  std::string cudnn;         // "9.19.0"
  std::string cublas;        // "13.1.0"
};

// Describes `device`; throws Error if it is not usable. `in_use`: the device is
// this process's (made current, free memory read); else it is only described, without creating
// a context on it (free_bytes stays 0), as CPU runs do for their metadata.
GpuInfo gpu_info(int device = 0, bool in_use = true);

}  // namespace ringbench::cuda
