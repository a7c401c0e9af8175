// Owned CUDA resources: device arrays (counted against the emulated framebuffer cap of
// base/device_memory.h, so a vGPU profile's limit holds on a real GPU too), pinned host
// arrays for staging, streams and events.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <string>
#include <thread>

#include <cstddef>
#include <utility>

#include "cuda/check.h"
#include "base/device_memory.h"
#include "base/errors.h"

namespace ringbench::cuda {

namespace detail {

// An owned array's pointer and element count: they move (the source left empty; assignment
// swaps, so the destination's old array goes with the source), never copy. The owner frees.
template <class T>
class ArrayHandle {
 public:
  T* data() const { return p_; }
  size_t size() const { return n_; }

 protected:
  ArrayHandle() = default;
  explicit ArrayHandle(size_t n) : n_(n) {}
  ArrayHandle(ArrayHandle&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  ArrayHandle& operator=(ArrayHandle&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~ArrayHandle() = default;

  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace detail

template <class T>
class DeviceArray : public detail::ArrayHandle<T> {
 public:
  DeviceArray() = default;
  DeviceArray(size_t n, const char* what_for) : detail::ArrayHandle<T>(n) {
    if (!n) return;
    DeviceMemory::instance().reserve(bytes(), what_for);
    const cudaError_t e = cudaMalloc(&this->p_, bytes());
    if (e != cudaSuccess) {
      auto& mem = DeviceMemory::instance();
      mem.release(bytes());
      if (e == cudaErrorMemoryAllocation) {  // a real device's framebuffer is full: a result
        size_t free = 0, total = 0;
        cudaMemGetInfo(&free, &total);
        cudaGetLastError();
        throw DeviceOutOfMemory(bytes(), mem.in_use(), mem.cap() ? mem.cap() : total, what_for);
      }
      check(e, "cudaMalloc", __FILE__, __LINE__);
    }
  }
  DeviceArray(DeviceArray&&) noexcept = default;
  DeviceArray& operator=(DeviceArray&&) noexcept = default;
  ~DeviceArray() {
    if (this->p_) {
      cudaFree(this->p_);
      DeviceMemory::instance().release(bytes());
    }
  }
  size_t bytes() const { return this->n_ * sizeof(T); }
};

template <class T>
class PinnedArray : public detail::ArrayHandle<T> {
 public:
  PinnedArray() = default;
  explicit PinnedArray(size_t n) : detail::ArrayHandle<T>(n) {
    if (n) RB_CUDA(cudaMallocHost(reinterpret_cast<void**>(&this->p_), n * sizeof(T)));
  }
  PinnedArray(PinnedArray&&) noexcept = default;
  PinnedArray& operator=(PinnedArray&&) noexcept = default;
  ~PinnedArray() {
    if (this->p_) cudaFreeHost(this->p_);
  }
};

// Waits for queued GPU work by polling `query` (cudaStreamQuery, cudaEventQuery), at most
// `limit`: the driver's own waits have no timeout. Spins (yielding) for the first 2 ms, as the
// driver's default wait does, then sleeps between polls. Throws Error naming
// `what` on a CUDA error or when the limit passes.
inline constexpr std::chrono::seconds kGpuWaitLimit{300};  // no step of ours legitimately takes longer
template <class Query>
void wait_done(Query query, const char* what, std::chrono::milliseconds limit = kGpuWaitLimit) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t e = query();
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) check(e, what, __FILE__, __LINE__);
    cudaGetLastError();  // "not ready" is no error: clear it (as PyTorch's stream query does)
    const auto waited = std::chrono::steady_clock::now() - t0;
    if (waited > limit)
      throw Error(std::string(what) + ": the GPU work waited for has not finished after " +
                               std::to_string(limit.count() / 1000) + " s (a hung kernel?)");
    if (waited < std::chrono::milliseconds(2)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// For destructors: waits (bounded) for the work queued on `s` and reports nothing; an error of
// the step that left it queued is the one that matters.
inline void sync_quietly(cudaStream_t s) noexcept {
  try {
    wait_done([s] { return cudaStreamQuery(s); }, "waiting for a CUDA stream");
  } catch (const std::exception&) {
  }
}

class Stream {
 public:
  Stream() { RB_CUDA(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void sync() const { wait_done([this] { return cudaStreamQuery(s_); }, "waiting for a CUDA stream"); }

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
  void sync() const { wait_done([this] { return cudaEventQuery(e_); }, "waiting for a CUDA event"); }

 private:
  cudaEvent_t e_{};
};

}  // namespace ringbench::cuda
