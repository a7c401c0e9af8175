// The device protocol's fuzz targets' channel: the fuzzer's input is what the other side sends;
// what this side would send is dropped.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "base/errors.h"
#include "runner/remote/channel.h"

namespace ringbench::fuzzing {

class MemoryChannel final : public remote::Channel {
 public:
  MemoryChannel(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool read(void* out, size_t n, remote::Millis, bool at_boundary) override {
    if (at_boundary && n > 0 && at_ == n_) return false;
    if (n > n_ - at_) throw IoError(-1, "the input ended in the middle of a message");
    std::memcpy(out, p_ + at_, n);
    at_ += n;
    return true;
  }
  void write(const void*, size_t, remote::Millis) override {}
  std::string peer() const override { return "fuzz"; }

 private:
  const uint8_t* p_;
  size_t n_, at_ = 0;
};

}  // namespace ringbench::fuzzing
