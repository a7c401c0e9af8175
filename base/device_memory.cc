#include "base/device_memory.h"

#include <cstdio>
#include <cstdlib>
#include <new>

namespace ringbench {

namespace {
std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1 << 20));
  return buf;
}
}  // namespace

DeviceOutOfMemory::DeviceOutOfMemory(size_t req, size_t used, size_t limit, std::string what)
    : Error("out of device memory: allocating " + mib(req) + " for " + what + " with " +
                         mib(used) + " in use of a " + mib(limit) + " framebuffer"),
      requested(req), in_use(used), cap(limit), what_for(std::move(what)) {}

DeviceMemory& DeviceMemory::instance() {
  static DeviceMemory m;
  return m;
}

void DeviceMemory::set_cap(size_t bytes) { cap_.store(bytes); }

namespace {
thread_local DeviceMemoryScope* t_scope = nullptr;
}  // namespace

DeviceMemoryScope::DeviceMemoryScope(size_t limit) : limit_(limit), outer_(t_scope) { t_scope = this; }
DeviceMemoryScope::~DeviceMemoryScope() { t_scope = outer_; }

void DeviceMemory::release(size_t bytes) noexcept {
  in_use_ -= bytes;
  if (t_scope) t_scope->kept_ -= int64_t(bytes);
}

void DeviceMemory::reserve(size_t bytes, const char* what_for) {
  if (DeviceMemoryScope* s = t_scope) {
    if (s->limit_ && (s->bytes() > s->limit_ || bytes > s->limit_ - s->bytes()))
      throw DeviceOutOfMemory(bytes, s->bytes(), s->limit_, what_for);
  }
  const size_t cap = cap_.load();
  size_t used = in_use_.load();
  do {
    if (cap && (used > cap || bytes > cap - used)) throw DeviceOutOfMemory(bytes, used, cap, what_for);
  } while (!in_use_.compare_exchange_weak(used, used + bytes));
  size_t peak = peak_.load();
  while (used + bytes > peak && !peak_.compare_exchange_weak(peak, used + bytes)) {
  }
  if (t_scope) t_scope->kept_ += int64_t(bytes);
}

void* DeviceMemory::allocate(size_t bytes, const char* what_for) {
  reserve(bytes, what_for);
  void* p = bytes ? std::aligned_alloc(64, (bytes + 63) / 64 * 64) : nullptr;
  if (bytes && !p) {
    release(bytes);
    throw std::bad_alloc();
  }
  return p;
}

void DeviceMemory::deallocate(void* p, size_t bytes) noexcept {
  std::free(p);
  release(bytes);
}

}  // namespace ringbench
