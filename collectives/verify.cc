#include "collectives/verify.h"

#include <cstring>

#include "collectives/reduce.h"

namespace ringbench {
namespace {

uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// Values lie in [0, cap) with cap = 2^24 (float) or 2^8 (half, bfloat16) divided by the
// world size rounded up to a power of two, so every partial sum is an exact integer.
uint32_t value(DType t, size_t index, int rank, int nranks) {
  uint32_t cap = t == DType::f32 ? 1u << 24 : 1u << 8;
  while (cap > 1 && static_cast<uint32_t>(nranks) > (t == DType::f32 ? 1u << 24 : 1u << 8) / cap)
    cap >>= 1;
  uint32_t h = mix(index * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(rank) * 0x632be5ab);
  return h & (cap - 1);
}

uint16_t to_narrow(DType t, float v) { return t == DType::f16 ? float_to_half(v) : float_to_bf16(v); }

}  // namespace

void fill_input(DType t, void* data, size_t count, int rank, int nranks) {
  for (size_t i = 0; i < count; ++i) {
    float v = static_cast<float>(value(t, i, rank, nranks));
    if (t == DType::f32) {
      static_cast<float*>(data)[i] = v;
    } else {
      static_cast<uint16_t*>(data)[i] = to_narrow(t, v);
    }
  }
}

float expected_value(DType t, size_t index, int nranks, ReduceOp op) {
  uint32_t sum = 0;
  for (int r = 0; r < nranks; ++r) sum += value(t, index, r, nranks);
  float s = static_cast<float>(sum);
  return op == ReduceOp::avg ? s / static_cast<float>(nranks) : s;
}

bool same_in_dtype(DType t, const void* data, size_t i, float e) {
  if (t == DType::f32) {
    const float got = static_cast<const float*>(data)[i];
    return std::memcmp(&got, &e, sizeof e) == 0;
  }
  return static_cast<const uint16_t*>(data)[i] == to_narrow(t, e);
}

size_t count_wrong(DType t, const void* data, size_t count, int nranks, ReduceOp op) {
  return count_unlike(t, data, count, [&](size_t i) { return expected_value(t, i, nranks, op); });
}

uint32_t distinct_bits(DType t, size_t index, int rank, int nranks) {
  // index * nranks + rank, scrambled by a bijection of the low `bits` bits (an odd multiplier and
  // an xor-shift), so that neighbours differ in many bits; the top bits of the exponent stay 0.
  const int bits = t == DType::f32 ? 30 : 14;
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t k = (static_cast<uint64_t>(index) * static_cast<uint64_t>(nranks) + static_cast<uint64_t>(rank)) & mask;
  k = (k * 0x2545f491ULL) & mask;
  k ^= k >> (bits / 2);
  return static_cast<uint32_t>(k);
}

void fill_distinct(DType t, void* data, size_t count, int rank, int nranks) {
  for (size_t i = 0; i < count; ++i) {
    const uint32_t b = distinct_bits(t, i, rank, nranks);
    if (t == DType::f32) {
      static_cast<uint32_t*>(data)[i] = b;
    } else {
      static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(b);
    }
  }
}

float input_value(DType t, size_t index, int rank, int nranks) {
  return static_cast<float>(value(t, index, rank, nranks));
}

}  // namespace ringbench
