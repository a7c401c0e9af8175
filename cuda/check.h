// Error checks for the CUDA runtime, cuBLAS and cuDNN: a failed call throws Error
// naming the call, its error and where it was made (never a silent wrong result).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <stdexcept>
#include <string>

#include "base/errors.h"

namespace ringbench::cuda {

[[noreturn]] inline void fail(const char* call, const std::string& error, const char* file, int line) {
  throw Error(std::string(call) + " failed: " + error + " (" + file + ":" +
                           std::to_string(line) + ")");
}

inline void check(cudaError_t e, const char* call, const char* file, int line) {
  // Clear a non-sticky error, so that the next kernel launch's check does not report it again.
  if (e != cudaSuccess) cudaGetLastError();
  if (e != cudaSuccess) fail(call, std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e), file, line);
}
inline void check(cudnnStatus_t s, const char* call, const char* file, int line) {
  if (s != CUDNN_STATUS_SUCCESS) fail(call, cudnnGetErrorString(s), file, line);
}
inline void check(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(call, cublasGetStatusString(s), file, line);
}

}  // namespace ringbench::cuda

#define RB_CUDA(call) ::ringbench::cuda::check((call), #call, __FILE__, __LINE__)
