// Decode memory shared by every decoding thread of the process. A JPEG as large as the decoder
// takes (64 Mpixels) needs about 576 MB while it decodes (its RGB pixels and, for a progressive
// file, libjpeg's whole-image coefficients), so --data-threads workers meeting such (valid)
// images at once could take tens of GB. Each decode reserves its bytes here first: together
// they stay within the budget, waiting their turn when it is full.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "input/jpeg.h"

namespace ringbench::input {

constexpr uint64_t kDecodeMemoryBytes = uint64_t(1) << 30;  // the process's budget
constexpr std::chrono::seconds kDecodeMemoryWait{120};

class DecodeBudget {
 public:
  DecodeBudget(uint64_t bytes, std::chrono::milliseconds max_wait) : bytes_(bytes), max_wait_(max_wait) {}
  // Waits until `bytes` fit beside what others hold (a reservation alone always fits, whatever
  // its size), at most max_wait; then throws ResourceError.
  void acquire(uint64_t bytes);
  void release(uint64_t bytes);
  uint64_t in_use() const;
  uint64_t peak() const;  // the most held at once
  uint64_t reservations() const;  // acquire()s granted so far

 private:
  const uint64_t bytes_;
  const std::chrono::milliseconds max_wait_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t used_ = 0, peak_ = 0, reservations_ = 0;
};

// The process's budget: kDecodeMemoryBytes, waits of at most kDecodeMemoryWait.
DecodeBudget& decode_budget();

// Bytes held while decoding a `full` image at scale `s`: its RGB pixels at that scale, plus
// libjpeg's whole-image coefficients as a progressive file needs them (2 bytes a coefficient,
// three full-size components at most).
uint64_t decode_memory_bytes(JpegSize full, Scale s);

// A reservation for the lifetime of one decode.
class DecodeReservation {
 public:
  DecodeReservation(DecodeBudget& budget, uint64_t bytes) : budget_(budget), bytes_(bytes) { budget_.acquire(bytes_); }
  ~DecodeReservation() { budget_.release(bytes_); }
  DecodeReservation(const DecodeReservation&) = delete;
  DecodeReservation& operator=(const DecodeReservation&) = delete;

 private:
  DecodeBudget& budget_;
  const uint64_t bytes_;
};

}  // namespace ringbench::input
