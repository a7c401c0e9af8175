#include "runner/migrate/framebuffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/errors.h"

namespace ringbench::migrate {
namespace {

// Pseudo-random contents, so that nothing on the way (a compressing link, a zero-page
// shortcut) could move them for less than their size.
void fill(char* p, size_t bytes, uint64_t seed) {
  uint64_t x = seed;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    std::memcpy(p + i, &z, 8);
  }
  for (; i < bytes; ++i) p[i] = char(i);
}

}  // namespace

Framebuffer::Framebuffer(size_t bytes, uint64_t fill_seed) : bytes_(bytes) {
  if (bytes == 0) throw Error("an emulated framebuffer of 0 bytes");
  // A target's memory is faulted in now, as a destination VM's framebuffer exists before the copy
  // starts: the stun then pays for the bytes, not for the kernel zeroing pages on first touch.
  const int populate = fill_seed == 0 ? MAP_POPULATE : 0;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | populate, -1, 0);
  if (p == MAP_FAILED)
    throw Error("cannot allocate the emulated framebuffer (" + std::to_string(bytes >> 20) + " MiB): " +
                std::strerror(errno));
  data_ = static_cast<char*>(p);
  dirty_ = std::make_unique<std::atomic<bool>[]>(chunks());
  for (size_t c = 0; c < chunks(); ++c) dirty_[c] = fill_seed != 0;
  if (fill_seed != 0) fill(data_, bytes, fill_seed);
}

Framebuffer::~Framebuffer() { ::munmap(data_, bytes_); }

size_t Framebuffer::chunk_bytes(size_t c) const {
  const size_t begin = c * kChunkBytes;
  return begin >= bytes_ ? 0 : std::min(kChunkBytes, bytes_ - begin);
}

void Framebuffer::mark(size_t offset, size_t len) {
  if (len == 0) return;
  for (size_t c = offset / kChunkBytes; c <= (offset + len - 1) / kChunkBytes; ++c)
    dirty_[c].store(true, std::memory_order_release);
}

void Framebuffer::write(size_t offset, const void* src, size_t len) {
  if (offset > bytes_ || len > bytes_ - offset) throw Error("a write past the emulated framebuffer's end");
  if (len == 0) return;  // an empty tensor (no momentum yet): src may be null, which memcpy must not see
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::memcpy(data_ + offset, src, len);
  }
  mark(offset, len);  // after the bytes: a copier that clears the bit later sees them
}

void Framebuffer::read(size_t offset, void* dst, size_t len) const {
  if (offset > bytes_ || len > bytes_ - offset) throw Error("a read past the emulated framebuffer's end");
  std::lock_guard<std::mutex> lock(mu_);
  std::memcpy(dst, data_ + offset, len);
}

size_t Framebuffer::take_if_dirty(size_t c, char* out) {
  if (!dirty_[c].exchange(false, std::memory_order_acq_rel)) return 0;
  const size_t n = chunk_bytes(c);
  std::lock_guard<std::mutex> lock(mu_);
  std::memcpy(out, data_ + c * kChunkBytes, n);
  return n;
}

size_t Framebuffer::dirty_bytes() const {
  size_t n = 0;
  for (size_t c = 0; c < chunks(); ++c)
    if (dirty_[c].load(std::memory_order_acquire)) n += chunk_bytes(c);
  return n;
}

char* Framebuffer::chunk_data(size_t c) {
  if (c >= chunks()) throw Error("chunk " + std::to_string(c) + " is past the framebuffer's " + std::to_string(chunks()));
  dirty_[c].store(false, std::memory_order_release);
  return data_ + c * kChunkBytes;
}

}  // namespace ringbench::migrate
