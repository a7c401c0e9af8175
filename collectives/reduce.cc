#include "collectives/reduce.h"

#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "base/errors.h"

#if defined(__x86_64__)
#include <cpuid.h>
// GCC 12's AVX-512 headers trip a false -Wmaybe-uninitialized on their own
// _mm512_undefined_*() when inlined.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop
#define RB_AVX512 __attribute__((target("avx512f,avx512bw")))
#define RB_AVX2 __attribute__((target("avx2,f16c")))
#endif

namespace ringbench {

// ---- Scalar conversions ------------------------------------------------------------------

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, or NaN with its payload
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal half: normalize; every half subnormal is a normal float.
    uint32_t e = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  uint32_t r;
  if (ax > 0x7f800000u) {
    r = 0x7e00u | ((ax >> 13) & 0x3ffu);  // quiet NaN keeping the payload's top bits, as F16C
  } else if (ax >= 0x477ff000u) {
    r = 0x7c00u;  // >= 65520 (halfway from 65504 to 2^16) rounds to inf
  } else if (ax >= 0x38800000u) {
    // Normal half: rebias, then round the 13 dropped bits to nearest even; a carry out of
    // the mantissa correctly bumps the exponent.
    const uint32_t y = ax - 0x38000000u;
    r = (y + 0xfffu + ((y >> 13) & 1u)) >> 13;
  } else if (ax <= 0x33000000u) {
    r = 0;  // <= 2^-25 (half the smallest subnormal) rounds to zero
  } else {
    // Subnormal half: the result is round(|f| * 2^24) = mantissa >> shift, rounded.
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - (ax >> 23);  // 14..24
    r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u) != 0)) ++r;
  }
  return static_cast<uint16_t>(sign | r);
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t{b} << 16); }

uint16_t float_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

namespace {

// ---- Kernels ----------------------------------------------------------------------------
// Every kernel has one signature so that a table can hold them; `b` is ignored by Op::div
// (divide() passes src twice).

enum class Op { sum, sum_div, div, narrow, widen };  // narrow: float -> T; widen: T -> float
using Kernel = void (*)(void* dst, const void* a, const void* b, size_t n, float divisor);

template <DType T>
struct Elem;
template <>
struct Elem<DType::f32> {
  using type = float;
  static float widen(float v) { return v; }
  static float narrow(float v) { return v; }
};
template <>
struct Elem<DType::f16> {
  using type = uint16_t;
  static float widen(uint16_t v) { return half_to_float(v); }
  static uint16_t narrow(float v) { return float_to_half(v); }
};
template <>
struct Elem<DType::bf16> {
  using type = uint16_t;
  static float widen(uint16_t v) { return bf16_to_float(v); }
  static uint16_t narrow(float v) { return float_to_bf16(v); }
};

// narrow_floats and widen_to_floats, one element at a time.
template <DType T, Op O>
void convert_scalar(void* dst, const void* src, size_t n) {
  using E = Elem<T>;
  using S = typename E::type;
  if constexpr (O == Op::narrow) {
    auto* o = static_cast<S*>(dst);
    const auto* x = static_cast<const float*>(src);
    for (size_t i = 0; i < n; ++i) o[i] = E::narrow(x[i]);
  } else {
    auto* o = static_cast<float*>(dst);
    const auto* x = static_cast<const S*>(src);
    for (size_t i = 0; i < n; ++i) o[i] = E::widen(x[i]);
  }
}

template <DType T, Op O>
void kernel_scalar(void* dst, const void* a, const void* b, size_t n, float divisor) {
  if constexpr (O == Op::narrow || O == Op::widen) {
    convert_scalar<T, O>(dst, a, n);
    return;
  }
  using E = Elem<T>;
  using S = typename E::type;
  auto* o = static_cast<S*>(dst);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  for (size_t i = 0; i < n; ++i) {
    float v = E::widen(x[i]);
    if constexpr (O != Op::div) v += E::widen(y[i]);
    if constexpr (O != Op::sum) v /= divisor;
    o[i] = E::narrow(v);
  }
}

#if defined(__x86_64__)

// Each vector kernel step handles two vectors of floats (32 elements with AVX-512, 16 with
// AVX2); the last, partial step runs on zero-padded copies, so no element takes another path.
// The f16 conversions are F16C's, rounding to nearest even like float_to_half.
// bf16 is widened by interleaving with zeros, which puts each bf16 in the top half of a
// 32-bit lane: that is its float. The interleave shuffles lanes within 128-bit blocks and the
// narrowing pack undoes it, so elements come back in order.

// The loop of both vector kernels: `Step` handles W elements, the last partial step runs on
// zero-padded copies. Always inlined into the kernel, whose target attribute then covers the
// steps; only pointers and a float cross it, so no vector type passes through code compiled
// without the ISA.
using Step = void (*)(void* dst, const void* a, const void* b, float divisor);

template <DType T, Op O, size_t W, Step step>
[[gnu::always_inline]] inline void vector_kernel(void* dst, const void* a, const void* b, size_t n,
                                                 float divisor) {
  using S = typename Elem<T>::type;
  auto* o = static_cast<S*>(dst);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  size_t i = 0;
  for (; i + W <= n; i += W) step(o + i, x + i, y + i, divisor);
  if (i < n) {
    S xs[W] = {}, ys[W] = {};
    const size_t bytes = (n - i) * sizeof(S);
    std::memcpy(xs, x + i, bytes);
    if constexpr (O != Op::div) std::memcpy(ys, y + i, bytes);
    step(xs, xs, ys, divisor);
    std::memcpy(o + i, xs, bytes);
  }
}

struct Pair512 {
  __m512 lo, hi;
};

template <DType T>
RB_AVX512 inline Pair512 load32(const void* p) {
  const auto* c = static_cast<const char*>(p);
  if constexpr (T == DType::f32) {
    return {_mm512_loadu_ps(c), _mm512_loadu_ps(c + 64)};
  } else if constexpr (T == DType::f16) {
    return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c))),
            _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 32)))};
  } else {
    const __m512i v = _mm512_loadu_si512(p);
    const __m512i zero = _mm512_setzero_si512();
    return {_mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, v)),
            _mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, v))};
  }
}

// float_to_bf16 on each lane; the result is in the lane's low 16 bits.
RB_AVX512 inline __m512i round_bf16(__m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i top = _mm512_srli_epi32(x, 16);
  const __m512i lsb = _mm512_and_si512(top, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(rounded, nan, top, _mm512_set1_epi32(0x40));
}

template <DType T>
RB_AVX512 inline void store32(void* p, Pair512 v) {
  auto* c = static_cast<char*>(p);
  if constexpr (T == DType::f32) {
    _mm512_storeu_ps(c, v.lo);
    _mm512_storeu_ps(c + 64, v.hi);
  } else if constexpr (T == DType::f16) {
    constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), _mm512_cvtps_ph(v.lo, kRne));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 32), _mm512_cvtps_ph(v.hi, kRne));
  } else {
    // Lanes hold values <= 0xffff, so the saturating pack only narrows.
    _mm512_storeu_si512(p, _mm512_packus_epi32(round_bf16(v.lo), round_bf16(v.hi)));
  }
}

template <DType T, Op O>
RB_AVX512 inline void step32(void* dst, const void* a, const void* b, float divisor) {
  Pair512 v = load32<T>(a);
  if constexpr (O != Op::div) {
    const Pair512 w = load32<T>(b);
    v = {_mm512_add_ps(v.lo, w.lo), _mm512_add_ps(v.hi, w.hi)};
  }
  if constexpr (O != Op::sum) {
    const __m512 d = _mm512_set1_ps(divisor);
    v = {_mm512_div_ps(v.lo, d), _mm512_div_ps(v.hi, d)};
  }
  store32<T>(dst, v);
}

// 16 floats to T and back, in order (load32/store32 keep bf16 lanes interleaved within 128-bit
// blocks, which only a load and store of the same type undo).
template <DType T>
RB_AVX512 inline void narrow16(void* dst, const float* src) {
  const __m512 v = _mm512_loadu_ps(src);
  if constexpr (T == DType::f16)
    _mm256_storeu_si256(static_cast<__m256i*>(dst), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  else
    _mm256_storeu_si256(static_cast<__m256i*>(dst), _mm512_cvtepi32_epi16(round_bf16(v)));
}

template <DType T>
RB_AVX512 inline void widen16(float* dst, const void* src) {
  const __m256i v = _mm256_loadu_si256(static_cast<const __m256i*>(src));
  if constexpr (T == DType::f16)
    _mm512_storeu_ps(dst, _mm512_cvtph_ps(v));
  else
    _mm512_storeu_ps(dst, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16)));
}

template <DType T, Op O>
RB_AVX512 void kernel_avx512(void* dst, const void* a, const void* b, size_t n, float divisor) {
  if constexpr ((O == Op::narrow || O == Op::widen) && T == DType::f32) {
    std::memcpy(dst, a, n * sizeof(float));
  } else if constexpr (O == Op::narrow) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) narrow16<T>(static_cast<uint16_t*>(dst) + i, static_cast<const float*>(a) + i);
    convert_scalar<T, O>(static_cast<uint16_t*>(dst) + i, static_cast<const float*>(a) + i, n - i);
  } else if constexpr (O == Op::widen) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) widen16<T>(static_cast<float*>(dst) + i, static_cast<const uint16_t*>(a) + i);
    convert_scalar<T, O>(static_cast<float*>(dst) + i, static_cast<const uint16_t*>(a) + i, n - i);
  } else {
    vector_kernel<T, O, 32, step32<T, O>>(dst, a, b, n, divisor);
  }
}

struct Pair256 {
  __m256 lo, hi;
};

template <DType T>
RB_AVX2 inline Pair256 load16(const void* p) {
  const auto* c = static_cast<const char*>(p);
  if constexpr (T == DType::f32) {
    return {_mm256_loadu_ps(reinterpret_cast<const float*>(c)),
            _mm256_loadu_ps(reinterpret_cast<const float*>(c + 32))};
  } else if constexpr (T == DType::f16) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c))),
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 16)))};
  } else {
    const __m256i v = _mm256_loadu_si256(static_cast<const __m256i*>(p));
    const __m256i zero = _mm256_setzero_si256();
    return {_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, v)),
            _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, v))};
  }
}

RB_AVX2 inline __m256i round_bf16(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i top = _mm256_srli_epi32(x, 16);
  const __m256i lsb = _mm256_and_si256(top, _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i qnan = _mm256_or_si256(top, _mm256_set1_epi32(0x40));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(rounded, qnan, nan);
}

template <DType T>
RB_AVX2 inline void store16(void* p, Pair256 v) {
  auto* c = static_cast<char*>(p);
  if constexpr (T == DType::f32) {
    _mm256_storeu_ps(reinterpret_cast<float*>(c), v.lo);
    _mm256_storeu_ps(reinterpret_cast<float*>(c + 32), v.hi);
  } else if constexpr (T == DType::f16) {
    constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(c), _mm256_cvtps_ph(v.lo, kRne));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(c + 16), _mm256_cvtps_ph(v.hi, kRne));
  } else {
    _mm256_storeu_si256(static_cast<__m256i*>(p),
                        _mm256_packus_epi32(round_bf16(v.lo), round_bf16(v.hi)));
  }
}

template <DType T, Op O>
RB_AVX2 inline void step16(void* dst, const void* a, const void* b, float divisor) {
  Pair256 v = load16<T>(a);
  if constexpr (O != Op::div) {
    const Pair256 w = load16<T>(b);
    v = {_mm256_add_ps(v.lo, w.lo), _mm256_add_ps(v.hi, w.hi)};
  }
  if constexpr (O != Op::sum) {
    const __m256 d = _mm256_set1_ps(divisor);
    v = {_mm256_div_ps(v.lo, d), _mm256_div_ps(v.hi, d)};
  }
  store16<T>(dst, v);
}

template <DType T, Op O>
RB_AVX2 void kernel_avx2(void* dst, const void* a, const void* b, size_t n, float divisor) {
  if constexpr (O == Op::narrow || O == Op::widen)
    convert_scalar<T, O>(dst, a, n);  // conversions are vectorized for AVX-512 only
  else
    vector_kernel<T, O, 16, step16<T, O>>(dst, a, b, n, divisor);
}

bool has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}
bool has_avx2() {
  __builtin_cpu_init();
  // F16C straight from CPUID: not every compiler's __builtin_cpu_supports knows it.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
         (ecx & bit_F16C) != 0;
}

#endif  // __x86_64__

bool always() { return true; }

// ---- Dispatch ---------------------------------------------------------------------------

struct Isa {
  const char* name;
  bool (*supported)();
  Kernel kernels[3][5];  // [DType][Op]
};

#define RB_ROW(k, t) {k<t, Op::sum>, k<t, Op::sum_div>, k<t, Op::div>, k<t, Op::narrow>, k<t, Op::widen>}
#define RB_TABLE(k) {RB_ROW(k, DType::f32), RB_ROW(k, DType::f16), RB_ROW(k, DType::bf16)}

// Best first.
constexpr Isa kIsas[] = {
#if defined(__x86_64__)
    {"avx512", has_avx512, RB_TABLE(kernel_avx512)},
    {"avx2", has_avx2, RB_TABLE(kernel_avx2)},
#endif
    {"scalar", always, RB_TABLE(kernel_scalar)},
};

#undef RB_TABLE
#undef RB_ROW

const Isa* find_isa(const char* name) {
  for (const Isa& isa : kIsas) {
    if (std::strcmp(isa.name, name) == 0) return &isa;
  }
  return nullptr;
}

const Isa* default_isa() {
  const char* env = std::getenv("RINGBENCH_REDUCE_ISA");
  if (env != nullptr && *env != '\0' && std::strcmp(env, "auto") != 0) {
    const Isa* isa = find_isa(env);
    if (isa == nullptr) {
      std::string known;
      for (const Isa& i : kIsas) known += std::string(i.name) + ", ";
      throw Error("RINGBENCH_REDUCE_ISA=" + std::string(env) + " is unknown: use " + known +
                  "or auto");
    }
    if (!isa->supported()) {
      throw Error("RINGBENCH_REDUCE_ISA=" + std::string(env) +
                  " is not supported by this CPU");
    }
    return isa;
  }
  for (const Isa& isa : kIsas) {
    if (isa.supported()) return &isa;
  }
  return &kIsas[std::size(kIsas) - 1];  // not reached: scalar is always supported
}

// nullptr until first use (or after set_reduce_isa("auto")). Racing first uses compute the
// same default; the exchange keeps a choice that set_reduce_isa made meanwhile.
std::atomic<const Isa*> g_isa{nullptr};

const Isa& active_isa() {
  const Isa* isa = g_isa.load(std::memory_order_acquire);
  if (isa == nullptr) {
    const Isa* chosen = default_isa();
    if (g_isa.compare_exchange_strong(isa, chosen, std::memory_order_acq_rel)) isa = chosen;
  }
  return *isa;
}

Kernel kernel(DType t, Op op) {
  return active_isa().kernels[static_cast<int>(t)][static_cast<int>(op)];
}

void check_dtype(DType t) {
  if (t != DType::f32 && t != DType::f16 && t != DType::bf16) {
    throw Error("reduce: unknown dtype " + std::to_string(static_cast<int>(t)));
  }
}

}  // namespace

void reduce_sum(DType t, void* dst, const void* a, const void* b, size_t count) {
  check_dtype(t);
  kernel(t, Op::sum)(dst, a, b, count, 1.0f);
}

void reduce_sum_div(DType t, void* dst, const void* a, const void* b, size_t count,
                    float divisor) {
  check_dtype(t);
  kernel(t, Op::sum_div)(dst, a, b, count, divisor);
}

void divide(DType t, void* dst, const void* src, size_t count, float divisor) {
  check_dtype(t);
  kernel(t, Op::div)(dst, src, src, count, divisor);
}

void narrow_floats(DType t, void* dst, const float* src, size_t count) {
  check_dtype(t);
  kernel(t, Op::narrow)(dst, src, nullptr, count, 1.0f);
}

void widen_to_floats(DType t, float* dst, const void* src, size_t count) {
  check_dtype(t);
  kernel(t, Op::widen)(dst, src, nullptr, count, 1.0f);
}

const char* reduce_isa() { return active_isa().name; }

bool set_reduce_isa(const char* name) {
  if (name == nullptr) return false;
  if (std::strcmp(name, "auto") == 0) {
    g_isa.store(nullptr, std::memory_order_release);
    return true;
  }
  const Isa* isa = find_isa(name);
  if (isa == nullptr || !isa->supported()) return false;
  g_isa.store(isa, std::memory_order_release);
  return true;
}

}  // namespace ringbench
