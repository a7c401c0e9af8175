// What the collectives beside the allreduce share (allgather, reduce-scatter, broadcast,
// alltoall, halving-doubling): the caller's input and output registered once with the transport
// for the largest count, an optional scratch area, and messages cut into segments so that long
// transfers pipeline through a chain of ranks.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "collectives/transport.h"

namespace ringbench {

// [begin, end) in elements.
struct Span {
  size_t begin, end;
  size_t size() const { return end - begin; }
};

// Segment k of `s` cut into pieces of `seg` elements; every span has at least one (possibly
// empty) segment, so that every step sends a message and a rank that disagrees on the count is
// caught by the tag check even at count 0.
size_t segment_count(Span s, size_t seg);
Span segment_of(Span s, size_t seg, size_t k);

class BlockBuffers {
 public:
  // `in_elems` and `out_elems`: the largest input and output; `scratch_elems`: scratch to keep
  // (0: none, and no scratch_buf()). in == out is in place (one registration).
  BlockBuffers(Transport& t, const void* in, size_t in_elems, void* out, size_t out_elems, size_t scratch_elems,
               size_t esize);
  const char* in() const { return in_; }
  char* out() const { return out_; }
  char* scratch() { return scratch_.data(); }
  Buffer& in_buf() { return *in_buf_; }
  Buffer& out_buf() { return out_buf_ ? *out_buf_ : *in_buf_; }
  Buffer& scratch_buf() { return *scratch_buf_; }
  size_t esize() const { return esize_; }

 private:
  const char* in_;
  char* out_;
  size_t esize_;
  std::vector<char> scratch_;
  std::unique_ptr<Buffer> in_buf_, out_buf_, scratch_buf_;
};

}  // namespace ringbench
