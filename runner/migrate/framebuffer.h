// The migrating rank's vGPU framebuffer, emulated in host memory where there is no GPU: as many
// bytes as its profile has, with the job's state (parameters, momentum, batch-norm statistics)
// and its activation working set inside, and the rest holding what the job allocated once.
//
// What changed is tracked per 2 MiB chunk, as a dirty bit set by every write: 2 MiB is the large
// page an NVIDIA GPU's MMU maps framebuffer memory with, the unit a driver could track writes
// in; and a training step rewrites its state densely (every parameter, every momentum value),
// so a finer grain would not make the dirty set smaller, only the bitmap bigger.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace ringbench::migrate {

class Framebuffer {
 public:
  static constexpr size_t kChunkBytes = size_t(2) << 20;

  // `fill_seed` != 0: every byte set from it (what the job allocated and wrote once), every
  // chunk dirty (nothing copied yet). 0: untouched memory, every chunk clean (a target's).
  Framebuffer(size_t bytes, uint64_t fill_seed);
  ~Framebuffer();
  Framebuffer(const Framebuffer&) = delete;
  Framebuffer& operator=(const Framebuffer&) = delete;

  size_t size() const { return bytes_; }
  size_t chunks() const { return (bytes_ + kChunkBytes - 1) / kChunkBytes; }
  size_t chunk_bytes(size_t c) const;

  // The job writes: copies into [offset, offset + len) and marks the chunks it touched dirty.
  void write(size_t offset, const void* src, size_t len);
  void read(size_t offset, void* dst, size_t len) const;
  // The copier: if chunk c is dirty, marks it clean and copies it to `out`, returning its
  // size; else 0. A write racing with it marks the chunk dirty again, so it is sent again.
  size_t take_if_dirty(size_t c, char* out);
  size_t dirty_bytes() const;
  bool dirty(size_t c) const { return dirty_[c].load(std::memory_order_acquire); }
  // Chunk c's bytes in place, for a copy with no writer running (the stunned source, the
  // target); marks it clean. Throws Error for a chunk past the end.
  char* chunk_data(size_t c);

 private:
  void mark(size_t offset, size_t len);

  size_t bytes_;
  char* data_ = nullptr;
  std::unique_ptr<std::atomic<bool>[]> dirty_;
  mutable std::mutex mu_;  // between the job's writes and the copier's reads of one chunk
};

}  // namespace ringbench::migrate
