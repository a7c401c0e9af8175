#include "models/param_layout.h"

#include <algorithm>
#include <vector>

namespace ringbench::models {

namespace {

constexpr int kBlock = 16;

// The index in OIhw16i16o of plain element (o, i, h, w).
size_t blocked_index(const BlockedWeight& t, int o, int i, int h, int w) {
  const size_t ib_count = size_t(t.in / kBlock);
  const size_t block = ((size_t(o / kBlock) * ib_count + size_t(i / kBlock)) * size_t(t.kh) + size_t(h)) *
                           size_t(t.kw) + size_t(w);
  return (block * kBlock + size_t(i % kBlock)) * kBlock + size_t(o % kBlock);
}

// plain -> blocked when `to_blocked`, else back; through a copy of the tensor.
void permute(const BlockedWeight& t, float* data, bool to_blocked) {
  const size_t n = size_t(t.out) * size_t(t.in) * size_t(t.kh) * size_t(t.kw);
  const std::vector<float> copy(data, data + n);
  size_t plain = 0;
  for (int o = 0; o < t.out; ++o)
    for (int i = 0; i < t.in; ++i)
      for (int h = 0; h < t.kh; ++h)
        for (int w = 0; w < t.kw; ++w, ++plain) {
          const size_t b = blocked_index(t, o, i, h, w);
          if (to_blocked) data[b] = copy[plain];
          else data[plain] = copy[b];
        }
}

}  // namespace

std::string ParamLayout::describe() const {
  if (plain()) return "plain";
  return std::to_string(blocked.size()) + " conv weight tensor" + (blocked.size() == 1 ? "" : "s") +
         " in OIhw16i16o, the rest plain";
}

bool blockable(int out, int in) { return out > 0 && in > 0 && out % kBlock == 0 && in % kBlock == 0; }

void to_param_layout(const ParamLayout& layout, float* flat) {
  for (const BlockedWeight& t : layout.blocked) permute(t, flat + t.offset, true);
}

void to_plain_params(const ParamLayout& layout, float* flat) {
  for (const BlockedWeight& t : layout.blocked) permute(t, flat + t.offset, false);
}

}  // namespace ringbench::models
