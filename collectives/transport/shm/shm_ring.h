// The two ends of a single-producer/single-consumer byte ring in shared memory (the layout is in
// shm_layout.h). Each end keeps its own position privately and only publishes it (release); the
// other end's position is read (acquire) and checked, since the peer may be malicious or broken:
// a ring that claims to hold more than its capacity, or less than nothing, is corrupt. Offsets
// are positions masked by the capacity (a power of two), so no value read from shared memory
// ever reaches an address. Every message takes a multiple of kAlign bytes of the ring (its payload
// is padded), so every position either end publishes is a multiple of kAlign, and a piece of a
// payload splits no element of up to kAlign bytes: a position that is not is corrupt too.
// Internal to the shm transport.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "collectives/transport/shm/shm_layout.h"

namespace ringbench::shm_ring {

inline constexpr size_t kCorrupt = SIZE_MAX;
inline constexpr size_t kAlign = 8;

// The padding after a payload of `n` bytes in the ring.
constexpr size_t padding(size_t n) { return (kAlign - n % kAlign) % kAlign; }

class RingEnd {
 public:
  void attach(shm_layout::RingControl* ctl, char* data, uint64_t capacity) {
    ctl_ = ctl;
    data_ = data;
    cap_ = capacity;
  }
  uint64_t capacity() const { return cap_; }
  uint64_t unpublished() const { return pos_ - published_; }
  // Ends a payload of `n` bytes: moves past its padding. It always fits: the writer's room left
  // is aligned while its position is not; the reader's writer published an aligned position.
  void pad(size_t n) { pos_ += padding(n); }

 protected:
  // Bytes between the writer's position `head` and the reader's `tail`, or kCorrupt. `theirs`
  // is the one read from shared memory: it must be aligned.
  size_t used(uint64_t head, uint64_t tail, uint64_t theirs) const {
    const uint64_t u = head - tail;  // modular: a tail past the head wraps to a huge value
    return u > cap_ || theirs % kAlign != 0 ? kCorrupt : static_cast<size_t>(u);
  }
  size_t offset(uint64_t pos) const { return static_cast<size_t>(pos & (cap_ - 1)); }
  // Of the `have` bytes at this end's position (free or readable), those that lie in one piece
  // (up to the ring's end), at most `n`.
  std::pair<char*, size_t> in_one_piece(size_t n, size_t have) const {
    if (have == kCorrupt) return {nullptr, kCorrupt};
    const size_t off = offset(pos_);
    return {data_ + off, std::min({n, have, static_cast<size_t>(cap_) - off})};
  }

  shm_layout::RingControl* ctl_ = nullptr;
  char* data_ = nullptr;
  uint64_t cap_ = 0;
  uint64_t pos_ = 0;        // private: this end's position
  uint64_t published_ = 0;  // what the other end has been told
};

class RingWriter : public RingEnd {
 public:
  // Free bytes, or kCorrupt.
  size_t room() const {
    const uint64_t tail = ctl_->tail.load(std::memory_order_acquire);
    const size_t u = used(pos_, tail, tail);
    return u == kCorrupt ? kCorrupt : static_cast<size_t>(cap_) - u;
  }
  // The free bytes that lie in one piece at the write position (up to the ring's end), at most
  // `n`: a pointer and a count (kCorrupt when the ring is). commit() moves past what was written.
  std::pair<char*, size_t> space(size_t n) const { return in_one_piece(n, room()); }
  void commit(size_t n) { pos_ += n; }
  // Copies up to `n` bytes in (unpublished); returns how many fit, or kCorrupt.
  size_t write(const char* src, size_t n) {
    const size_t free = room();
    if (free == kCorrupt) return kCorrupt;
    n = std::min(n, free);
    if (n == 0) return 0;
    const size_t off = offset(pos_), first = std::min<size_t>(n, static_cast<size_t>(cap_) - off);
    std::memcpy(data_ + off, src, first);
    std::memcpy(data_, src + first, n - first);
    pos_ += n;
    return n;
  }
  void publish() {
    ctl_->head.store(pos_, std::memory_order_release);
    published_ = pos_;
  }
};

class RingReader : public RingEnd {
 public:
  // Readable bytes, or kCorrupt.
  size_t available() const {
    const uint64_t head = ctl_->head.load(std::memory_order_acquire);
    return used(head, pos_, head);
  }
  // Copies up to `n` bytes out (unpublished); returns how many there were, or kCorrupt.
  size_t read(char* dst, size_t n) {
    const size_t have = available();
    if (have == kCorrupt) return kCorrupt;
    n = std::min(n, have);
    if (n == 0) return 0;
    const size_t off = offset(pos_), first = std::min<size_t>(n, static_cast<size_t>(cap_) - off);
    std::memcpy(dst, data_ + off, first);
    std::memcpy(dst + first, data_, n - first);
    pos_ += n;
    return n;
  }
  // The readable bytes that lie in one piece at the read position (up to the ring's end), at
  // most `n`: a pointer and a count (kCorrupt when the ring is). consume() moves past them.
  std::pair<const char*, size_t> peek(size_t n) const { return in_one_piece(n, available()); }
  void consume(size_t n) { pos_ += n; }
  void publish() {
    ctl_->tail.store(pos_, std::memory_order_release);
    published_ = pos_;
  }
};

}  // namespace ringbench::shm_ring
