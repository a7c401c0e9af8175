#include "collectives/block_buffers.h"

#include <algorithm>

namespace ringbench {

size_t segment_count(Span s, size_t seg) { return std::max<size_t>(1, (s.size() + seg - 1) / seg); }

Span segment_of(Span s, size_t seg, size_t k) {
  const size_t b = std::min(s.end, s.begin + k * seg);
  return {b, std::min(s.end, b + seg)};
}

BlockBuffers::BlockBuffers(Transport& t, const void* in, size_t in_elems, void* out, size_t out_elems,
                           size_t scratch_elems, size_t esize)
    : in_(static_cast<const char*>(in)), out_(static_cast<char*>(out)), esize_(esize) {
  if (t.size() == 1) return;  // one rank talks to nobody
  // In place, the output is the buffer that holds the input: register the larger extent once.
  const size_t in_bytes = (in == out ? std::max(in_elems, out_elems) : in_elems) * esize;
  in_buf_ = t.register_buffer(const_cast<void*>(in), in_bytes);
  if (in != out) out_buf_ = t.register_buffer(out, out_elems * esize);
  if (scratch_elems) {
    scratch_.resize(scratch_elems * esize);
    scratch_buf_ = t.register_buffer(scratch_.data(), scratch_.size());
  }
}

}  // namespace ringbench
