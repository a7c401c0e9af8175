#include "collectives/stream_reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "base/errors.h"
#include "collectives/reduce.h"

namespace ringbench {

StreamReducer::StreamReducer(DType t, char* dst, const char* a, float divisor)
    : t_(t), es_(dtype_size(t)), dst_(dst), a_(a), divisor_(divisor) {}

void StreamReducer::operator()(const char* p, size_t n) {
  if (stashed_ > 0) {  // complete the element split by the last piece
    const size_t k = std::min(es_ - stashed_, n);
    std::memcpy(stash_ + stashed_, p, k);
    stashed_ += k;
    p += k;
    n -= k;
    if (stashed_ < es_) return;
    reduce(stash_, 1);
    stashed_ = 0;
  }
  if (reinterpret_cast<uintptr_t>(p) % es_ == 0) {
    const size_t k = n / es_;
    reduce(p, k);
    p += k * es_;
    n -= k * es_;
  } else {
    alignas(64) char buf[4096];
    while (n >= es_) {
      const size_t k = std::min(n / es_, sizeof buf / es_);
      std::memcpy(buf, p, k * es_);
      reduce(buf, k);
      p += k * es_;
      n -= k * es_;
    }
  }
  std::memcpy(stash_, p, n);
  stashed_ = n;
}

void StreamReducer::reduce(const char* b, size_t elems) {
  if (elems == 0) return;
  const size_t off = done_ * es_;
  if (divisor_ != 0)
    reduce_sum_div(t_, dst_ + off, a_ + off, b, elems, divisor_);
  else
    reduce_sum(t_, dst_ + off, a_ + off, b, elems);
  done_ += elems;
}

void ForwardStep::operator()(const char* in, size_t offset, size_t n, char* next) const {
  const size_t es = dtype_size(t);
  if (n % es != 0)
    throw Error("a forwarded piece of " + std::to_string(n) + " bytes splits a " + std::to_string(es) + "-byte element");
  char* h = home + offset;
  char* first = next ? next : h;
  if (!a)
    std::memcpy(first, in, n);
  else if (divisor != 0)
    reduce_sum_div(t, first, a + offset, in, n / es, divisor);
  else
    reduce_sum(t, first, a + offset, in, n / es);
  if (next && keep) std::memcpy(h, next, n);
}

}  // namespace ringbench
