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

// One forward of the ring (a ForwardFn for Transport::irecv_forward): each received piece is
// added to `a` (with avg at the last step, divided) or, where `a` is null, copied; the result goes
// to the next rank's memory when the transport offers it, and to `home` when it does not or
// `keep` asks for it there too. Pieces must be whole elements (the transport's promise).
struct ForwardStep {
  DType t;
  char* home;
  const char* a;  // null: a copy (the allgather)
  float divisor;  // 0: a plain sum
  bool keep;      // the result is wanted in home as well
  void operator()(const char* in, size_t offset, size_t n, char* next) const;
};

}  // namespace ringbench
