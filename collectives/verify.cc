#include "collectives/verify.h"

#include <cstring>
#include <vector>

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
// world size rounded up to a power of two, so every partial sum is an exact integer (and a sum
// of the 16-bit types' values is below 2^8).
uint32_t value_cap(DType t, int nranks) {
  const uint32_t top = t == DType::f32 ? 1u << 24 : 1u << 8;
  uint32_t cap = top;
  while (cap > 1 && static_cast<uint32_t>(nranks) > top / cap) cap >>= 1;
  return cap;
}

inline uint32_t value_below(uint32_t cap, size_t index, int rank) {
  return mix(index * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(rank) * 0x632be5ab) & (cap - 1);
}

uint32_t value(DType t, size_t index, int rank, int nranks) { return value_below(value_cap(t, nranks), index, rank); }

uint16_t to_narrow(DType t, float v) { return t == DType::f16 ? float_to_half(v) : float_to_bf16(v); }

// A 16-bit type's bits of every sum below 2^8 (avg: divided by the ranks), by sum: one conversion
// per value instead of one per element.
std::vector<uint16_t> narrow_sums(DType t, int nranks, ReduceOp op) {
  std::vector<uint16_t> bits(256);
  for (uint32_t s = 0; s < bits.size(); ++s)
    bits[s] = to_narrow(t, op == ReduceOp::avg ? static_cast<float>(s) / static_cast<float>(nranks) : static_cast<float>(s));
  return bits;
}

}  // namespace

void fill_input(DType t, void* data, size_t count, int rank, int nranks) {
  const uint32_t cap = value_cap(t, nranks);
  if (t == DType::f32) {
    for (size_t i = 0; i < count; ++i) static_cast<float*>(data)[i] = static_cast<float>(value_below(cap, i, rank));
    return;
  }
  const std::vector<uint16_t> bits = narrow_sums(t, 1, ReduceOp::sum);
  for (size_t i = 0; i < count; ++i) static_cast<uint16_t*>(data)[i] = bits[value_below(cap, i, rank)];
}

float expected_value(DType t, size_t index, int nranks, ReduceOp op) {
  const uint32_t cap = value_cap(t, nranks);
  uint32_t sum = 0;
  for (int r = 0; r < nranks; ++r) sum += value_below(cap, index, r);
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

size_t count_wrong(DType t, const void* data, size_t count, int nranks, ReduceOp op, size_t first) {
  if (t == DType::f32)
    return count_unlike(t, data, count, [&](size_t i) { return expected_value(t, first + i, nranks, op); });
  const uint32_t cap = value_cap(t, nranks);
  const std::vector<uint16_t> bits = narrow_sums(t, nranks, op);
  const auto* d = static_cast<const uint16_t*>(data);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    uint32_t sum = 0;
    for (int r = 0; r < nranks; ++r) sum += value_below(cap, first + i, r);
    wrong += d[i] != bits[sum];
  }
  return wrong;
}

namespace {

int distinct_width(DType t) { return t == DType::f32 ? 30 : 14; }  // the top bits of the exponent stay 0

// distinct_bits of key = index * nranks + rank: scrambled by a bijection of the low `bits` bits
// (an odd multiplier and an xor-shift), so that neighbours differ in many bits. Past 2^bits a
// hash of it instead: a pattern that repeated would let a block moved by a multiple of its
// period (2^31 elements, say, from a byte count cut to 32 bits) pass.
inline uint32_t key_bits(uint64_t key, int bits) {
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  if (key > mask) return static_cast<uint32_t>(mix(key) & mask);
  uint64_t k = (key * 0x2545f491ULL) & mask;
  k ^= k >> (bits / 2);
  return static_cast<uint32_t>(k);
}

uint64_t first_key(size_t index, int rank, int nranks) {
  return static_cast<uint64_t>(index) * static_cast<uint64_t>(nranks) + static_cast<uint64_t>(rank);
}

// Elements of `d` unlike key_bits of first, first + stride, ...: one tight loop, no call per element.
template <class Word>
size_t unlike(const Word* d, size_t count, uint64_t key, uint64_t stride, int bits) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i, key += stride) wrong += d[i] != key_bits(key, bits);
  return wrong;
}

}  // namespace

uint32_t distinct_bits(DType t, size_t index, int rank, int nranks) {
  return key_bits(first_key(index, rank, nranks), distinct_width(t));
}

void fill_distinct(DType t, void* data, size_t count, int rank, int nranks) {
  const int bits = distinct_width(t);
  const uint64_t stride = static_cast<uint64_t>(nranks);
  uint64_t key = first_key(0, rank, nranks);
  if (t == DType::f32)
    for (size_t i = 0; i < count; ++i, key += stride) static_cast<uint32_t*>(data)[i] = key_bits(key, bits);
  else
    for (size_t i = 0; i < count; ++i, key += stride)
      static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(key_bits(key, bits));
}

size_t count_unlike_distinct(DType t, const void* data, size_t count, size_t first, int rank, int nranks) {
  const uint64_t key = first_key(first, rank, nranks), stride = static_cast<uint64_t>(nranks);
  const int bits = distinct_width(t);
  return t == DType::f32 ? unlike(static_cast<const uint32_t*>(data), count, key, stride, bits)
                         : unlike(static_cast<const uint16_t*>(data), count, key, stride, bits);
}

float input_value(DType t, size_t index, int rank, int nranks) {
  return static_cast<float>(value(t, index, rank, nranks));
}

}  // namespace ringbench
