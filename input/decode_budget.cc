#include "input/decode_budget.h"

#include <algorithm>
#include <string>

#include "input/image_set.h"

namespace ringbench::input {

void DecodeBudget::acquire(uint64_t bytes) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, max_wait_, [&] { return used_ == 0 || used_ + bytes <= bytes_; }))
    throw ResourceError("input pipeline: waited " + std::to_string(max_wait_.count() / 1000) + " s for " +
                        std::to_string(bytes >> 20) + " MiB of decode memory (the process's budget is " +
                        std::to_string(bytes_ >> 20) + " MiB, " + std::to_string(used_ >> 20) +
                        " MiB held by other decodes): lower --data-threads");
  used_ += bytes;
  peak_ = std::max(peak_, used_);
  ++reservations_;
}

void DecodeBudget::release(uint64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= std::min(used_, bytes);
  }
  cv_.notify_all();
}

uint64_t DecodeBudget::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

uint64_t DecodeBudget::peak() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

uint64_t DecodeBudget::reservations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reservations_;
}

DecodeBudget& decode_budget() {
  static DecodeBudget budget(kDecodeMemoryBytes, kDecodeMemoryWait);
  return budget;
}

uint64_t decode_memory_bytes(JpegSize full, Scale s) {
  const uint64_t full_pixels = uint64_t(full.width) * uint64_t(full.height);
  const uint64_t scaled_pixels = uint64_t(scaled(full.width, s)) * uint64_t(scaled(full.height, s));
  return scaled_pixels * 3 + full_pixels * 3 * 2;
}

}  // namespace ringbench::input
