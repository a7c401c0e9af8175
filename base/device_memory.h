// The backends' device memory: every buffer a backend keeps for training (parameters,
// gradients, momentum, batch-norm state, activations and their gradients, workspaces) is
// allocated here, so a cap (an emulated vGPU profile's framebuffer) turns an allocation past it
// into DeviceOutOfMemory, as cudaMalloc fails on a real vGPU, and the peak is known when it fits.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/errors.h"

namespace ringbench {

class DeviceOutOfMemory : public Error {
 public:
  DeviceOutOfMemory(size_t requested, size_t in_use, size_t cap, std::string what_for);
  size_t requested, in_use, cap;  // bytes
  std::string what_for;
};

// Process-wide (one emulated device per process).
class DeviceMemory {
 public:
  static DeviceMemory& instance();
  void set_cap(size_t bytes);  // 0: no cap
  size_t cap() const { return cap_.load(); }
  size_t in_use() const { return in_use_.load(); }
  size_t peak() const { return peak_.load(); }
  void reset_peak() { peak_.store(in_use_.load()); }

  // 64-byte aligned; throws DeviceOutOfMemory past the cap (std::bad_alloc if the host has none).
  void* allocate(size_t bytes, const char* what_for);
  void deallocate(void* p, size_t bytes) noexcept;
  // Accounting only, for memory allocated elsewhere (cudaMalloc): counts `bytes` against the
  // cap and the peak, or throws DeviceOutOfMemory; release() gives them back.
  void reserve(size_t bytes, const char* what_for);
  void release(size_t bytes) noexcept;

 private:
  std::atomic<size_t> cap_{0}, in_use_{0}, peak_{0};
};

// Counts the reservations this thread makes while it lives, apart from other threads' at the
// same time (what one network's build keeps, on a server building for several clients), and
// refuses with DeviceOutOfMemory past `limit` of them (0: no limit), before the device's cap.
// Releases on this thread count against it. One at a time per thread.
class DeviceMemoryScope {
 public:
  explicit DeviceMemoryScope(size_t limit = 0);
  ~DeviceMemoryScope();
  DeviceMemoryScope(const DeviceMemoryScope&) = delete;
  DeviceMemoryScope& operator=(const DeviceMemoryScope&) = delete;
  size_t bytes() const { return kept_ > 0 ? size_t(kept_) : 0; }  // reserved minus released, so far

 private:
  friend class DeviceMemory;
  size_t limit_;
  int64_t kept_ = 0;
  DeviceMemoryScope* outer_;
};

// For std::vector: std::vector<float, DeviceAllocator<float>>; `what_for` names its buffers in
// an out-of-memory error.
template <class T>
struct DeviceAllocator {
  using value_type = T;
  const char* what_for = "tensor";
  DeviceAllocator() = default;
  explicit DeviceAllocator(const char* what) : what_for(what) {}
  template <class U>
  DeviceAllocator(const DeviceAllocator<U>& o) : what_for(o.what_for) {}
  T* allocate(size_t n) { return static_cast<T*>(DeviceMemory::instance().allocate(n * sizeof(T), what_for)); }
  void deallocate(T* p, size_t n) noexcept { DeviceMemory::instance().deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const DeviceAllocator<U>&) const { return true; }
};
template <class T>
using DeviceVector = std::vector<T, DeviceAllocator<T>>;

// An owned raw buffer (for libraries that take a pointer, such as oneDNN memory objects).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, const char* what_for)
      : p_(DeviceMemory::instance().allocate(bytes, what_for)), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr, o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (p_) DeviceMemory::instance().deallocate(p_, bytes_);
  }
  void* data() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// The most memory a setup step kept allocated at once, beyond what was in use before it (what it
// made may be freed again by the time it returns): how ringbench compares inference's footprint
// with training's. Not thread-safe against other allocations while it runs.
template <class F>
size_t peak_bytes_of(F step) {
  DeviceMemory& dm = DeviceMemory::instance();
  const size_t base = dm.in_use();
  dm.reset_peak();
  step();
  return dm.peak() - base;
}

}  // namespace ringbench
