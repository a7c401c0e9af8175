#include "cuda/device.h"

#include "cuda/check.h"

namespace ringbench::cuda {

namespace {
std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }
}  // namespace

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    return std::string("no CUDA device: cudaGetDeviceCount says ") + cudaGetErrorName(e) + " (" +
           cudaGetErrorString(e) + ")";
  }
  if (n == 0) return "no CUDA device: cudaGetDeviceCount found none";
  return "";
}

GpuInfo gpu_info(int device, bool in_use) {
  GpuInfo g;
  g.device = device;
  if (in_use) RB_CUDA(cudaSetDevice(device));  // since CUDA 12 this creates the context
  cudaDeviceProp p{};
  RB_CUDA(cudaGetDeviceProperties(&p, device));
  g.name = p.name;
  char bus[32] = {};
  RB_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  g.pci_bus_id = bus;
  g.cc_major = p.major;
  g.cc_minor = p.minor;
  g.multiprocessors = p.multiProcessorCount;
  g.total_bytes = p.totalGlobalMem;
  if (in_use) RB_CUDA(cudaMemGetInfo(&g.free_bytes, &g.total_bytes));
  int v = 0;
  RB_CUDA(cudaDriverGetVersion(&v));
  g.driver = cuda_version(v);
  RB_CUDA(cudaRuntimeGetVersion(&v));
  g.runtime = cuda_version(v);
  const size_t dnn = cudnnGetVersion();  // major * 10000 + minor * 100 + patch since cuDNN 9
  g.cudnn = std::to_string(dnn / 10000) + "." + std::to_string(dnn % 10000 / 100) + "." +
            std::to_string(dnn % 100);
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  g.cublas = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  return g;
}

}  // namespace ringbench::cuda
