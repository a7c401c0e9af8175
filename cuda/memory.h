// Owned CUDA resources: device arrays (counted against the emulated framebuffer cap of
// models/device_memory.h, so a vGPU profile's limit holds on a real GPU too), pinned host
// arrays for staging, streams and events.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "cuda/check.h"
#include "models/device_memory.h"

namespace ringbench::cuda {

template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(size_t n, const char* what_for) : n_(n) {
    if (!n) return;
    models::DeviceMemory::instance().reserve(bytes(), what_for);
    const cudaError_t e = cudaMalloc(&p_, bytes());
    if (e != cudaSuccess) {
      models::DeviceMemory::instance().release(bytes());
      check(e, "cudaMalloc", __FILE__, __LINE__);
    }
  }
  DeviceArray(DeviceArray&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~DeviceArray() {
    if (p_) {
      cudaFree(p_);
      models::DeviceMemory::instance().release(bytes());
    }
  }
  T* data() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

template <class T>
class PinnedArray {
 public:
  PinnedArray() = default;
  explicit PinnedArray(size_t n) : n_(n) {
    if (n) RB_CUDA(cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  PinnedArray(PinnedArray&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  PinnedArray& operator=(PinnedArray&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~PinnedArray() {
    if (p_) cudaFreeHost(p_);
  }
  T* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

class Stream {
 public:
  Stream() { RB_CUDA(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void sync() const { RB_CUDA(cudaStreamSynchronize(s_)); }

 private:
  cudaStream_t s_{};
};

class Event {
 public:
  explicit Event(bool timing = false) {
    RB_CUDA(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~Event() { cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }
  void record(cudaStream_t s) { RB_CUDA(cudaEventRecord(e_, s)); }
  void wait_on(cudaStream_t s) const { RB_CUDA(cudaStreamWaitEvent(s, e_, 0)); }  // s waits for this
  void sync() const { RB_CUDA(cudaEventSynchronize(e_)); }

 private:
  cudaEvent_t e_{};
};

}  // namespace ringbench::cuda
