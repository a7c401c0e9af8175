// Reduces a message into a buffer as its bytes arrive (a RecvSink): dst = a + incoming, or
// (a + incoming) / divisor at the ring's last step. The ring hands it to transports that offer
// irecv_sink(), which then reduce straight out of their receive memory instead of copying into
// a slot first. Pieces may split an element, or (a stream of mixed element sizes) be misaligned:
// a split element waits in a stash, a misaligned piece goes through an aligned buffer.
#pragma once

#include <cstddef>

#include "collectives/dtype.h"

namespace ringbench {

class StreamReducer {
 public:
  // `dst` and `a` hold the message's elements; divisor 0 means a plain sum.
  StreamReducer(DType t, char* dst, const char* a, float divisor);
  void operator()(const char* bytes, size_t n);
  size_t elements_done() const { return done_; }

 private:
  void reduce(const char* b, size_t elems);

  DType t_;
  size_t es_;
  char* dst_;
  const char* a_;
  float divisor_;
  size_t done_ = 0;  // elements reduced
  alignas(8) char stash_[8] = {};
  size_t stashed_ = 0;  // bytes of a split element
};

}  // namespace ringbench
