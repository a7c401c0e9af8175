#include "collectives/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/errors.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define RB_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define RB_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define RB_POISON(p, n) ((void)(p), (void)(n))
#define RB_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace ringbench {

// Lets gtest print parameters as "half" rather than as a byte.
void PrintTo(DType t, std::ostream* os) { *os << dtype_name(t); }

namespace {

// ---- The test's own reference arithmetic ------------------------------------------------
// Narrow formats are decoded with ldexp and rounded by searching the sorted table of their
// values, independently of the bit tricks in reduce.cc.

struct Format {
  int mant_bits;       // 10 for half, 7 for bf16
  int min_exp;         // exponent of the subnormal ulp: -24 for half, -133 for bf16
  uint16_t inf_bits;   // 0x7c00 or 0x7f80
  std::vector<double> values;  // values[bits] for bits in [0, inf_bits]; inf counts as the
                               // next power of two, which is where rounding goes to inf
};

Format make_format(int mant_bits, int min_exp, uint16_t inf_bits) {
  Format f{mant_bits, min_exp, inf_bits, {}};
  for (uint32_t bits = 0; bits <= inf_bits; ++bits) f.values.push_back(0);
  for (uint32_t bits = 0; bits <= inf_bits; ++bits) {
    const int e = static_cast<int>(bits >> mant_bits);
    const int m = static_cast<int>(bits & ((1u << mant_bits) - 1));
    f.values[bits] = e == 0 ? std::ldexp(m, min_exp)
                            : std::ldexp((1 << mant_bits) + m, min_exp + e - 1);
  }
  return f;
}

const Format& half_format() {
  static const Format f = make_format(10, -24, 0x7c00);
  return f;
}
const Format& bf16_format() {
  static const Format f = make_format(7, -133, 0x7f80);
  return f;
}

bool is_nan_bits(const Format& f, uint16_t bits) {
  return (bits & f.inf_bits) == f.inf_bits && (bits & (f.inf_bits ^ 0x7fffu)) != 0;
}
bool is_quiet_nan_bits(const Format& f, uint16_t bits) {
  return is_nan_bits(f, bits) && (bits & (1u << (f.mant_bits - 1))) != 0;
}

double ref_decode(const Format& f, uint16_t bits) {
  if (is_nan_bits(f, bits)) return std::numeric_limits<double>::quiet_NaN();
  const uint16_t mag = bits & 0x7fffu;
  const double v = mag == f.inf_bits ? std::numeric_limits<double>::infinity() : f.values[mag];
  return (bits & 0x8000u) != 0 ? -v : v;
}

// Round to nearest, ties to even. NaN gives the format's canonical NaN (tests compare NaNs by
// kind only).
uint16_t ref_round(const Format& f, float x) {
  if (std::isnan(x)) return static_cast<uint16_t>(f.inf_bits | (1u << (f.mant_bits - 1)));
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double d = std::fabs(static_cast<double>(x));
  uint16_t r;
  if (d >= f.values.back()) {
    r = f.inf_bits;
  } else {
    const auto it = std::upper_bound(f.values.begin(), f.values.end(), d);
    const auto lo = static_cast<uint16_t>(it - f.values.begin() - 1);
    const double below = d - f.values[lo];
    const double above = f.values[lo + 1] - d;
    if (below < above || (below == above && (lo & 1) == 0)) r = lo;
    else r = static_cast<uint16_t>(lo + 1);
  }
  return static_cast<uint16_t>(sign | r);
}

uint32_t fbits(float f) { return std::bit_cast<uint32_t>(f); }

// ---- Scalar conversions -----------------------------------------------------------------

TEST(HalfConversion, KnownValues) {
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(0x1p-14f), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(0x3ffp-24f), 0x03ff);  // largest subnormal
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(float_to_half(1e6f), 0x7c00);
  EXPECT_EQ(float_to_half(-1e6f), 0xfc00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::max()), 0x7c00);

  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_to_float(0x03ff), 0x3ffp-24f);
  EXPECT_EQ(half_to_float(0x0400), 0x1p-14f);
  EXPECT_EQ(fbits(half_to_float(0x8000)), 0x80000000u);
  EXPECT_EQ(half_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(half_to_float(0xfc00), -std::numeric_limits<float>::infinity());
}

TEST(HalfConversion, TiesAndOverflowRoundToNearestEven) {
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // halfway to 2^16, 0x7bff is odd: inf
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00);  // tie, down to even
  EXPECT_EQ(float_to_half(1.0f + 0x3p-11f), 0x3c02);  // tie, up to even
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);  // just above the tie
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(float_to_half(-0x1p-25f), 0x8000);
  EXPECT_EQ(float_to_half(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half(0x3p-25f), 0x0002);  // 1.5 ulp: tie, up to even
  EXPECT_EQ(float_to_half(0x5p-25f), 0x0002);  // 2.5 ulp: tie, down to even
  EXPECT_EQ(float_to_half(0x7ffp-25f), 0x0400);  // 1023.5 ulp: up into the normals
  EXPECT_EQ(float_to_half(0x1p-30f), 0x0000);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
}

// Each float NaN (by its bits) narrows to a quiet NaN of `f` with the same sign, and each
// NaN of `f` widens to a float NaN.
void expect_nans_stay_nans(const Format& f, uint16_t (*narrow)(float), float (*widen)(uint16_t),
                           std::initializer_list<uint32_t> float_nans, std::initializer_list<uint16_t> nans) {
  for (uint32_t nan : float_nans) {
    const uint16_t n = narrow(std::bit_cast<float>(nan));
    EXPECT_TRUE(is_quiet_nan_bits(f, n)) << std::hex << nan << " -> " << n;
    EXPECT_EQ(n & 0x8000u, (nan >> 16) & 0x8000u) << std::hex << nan;
  }
  for (uint16_t n : nans) EXPECT_TRUE(std::isnan(widen(n))) << std::hex << n;
}

TEST(HalfConversion, NanStaysQuietNan) {
  expect_nans_stay_nans(half_format(), float_to_half, half_to_float,
                        {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfffffu, 0x7fffffffu},
                        {0x7e00, 0x7c01, 0xfe00, 0x7fff});
}

TEST(Bf16Conversion, KnownValues) {
  EXPECT_EQ(float_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x7f7f0000u)), 0x7f7f);  // largest finite
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x00010000u)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x7f7f7fffu)), 0x7f7f);  // just below the tie

  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(fbits(bf16_to_float(0x0001)), 0x00010000u);
  EXPECT_EQ(bf16_to_float(0xff80), -std::numeric_limits<float>::infinity());
}

TEST(Bf16Conversion, TiesRoundToNearestEven) {
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, down to even
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, up to even
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x7f7f8000u)), 0x7f80);  // tie at the top: inf
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x00008000u)), 0x0000);  // subnormal tie to 0
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x80018000u)), 0x8002);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x007fffffu)), 0x0080);  // up into normals
}

TEST(Bf16Conversion, NanStaysQuietNan) {
  expect_nans_stay_nans(bf16_format(), float_to_bf16, bf16_to_float,
                        {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7f80ffffu, 0x7fffffffu}, {0x7fc0, 0xff81});
}

// Every narrow value decodes to the reference value and round-trips through float.
void check_all_values(const Format& f, float (*widen)(uint16_t), uint16_t (*narrow)(float)) {
  for (uint32_t i = 0; i <= 0xffff; ++i) {
    const auto bits = static_cast<uint16_t>(i);
    const float v = widen(bits);
    if (is_nan_bits(f, bits)) {
      EXPECT_TRUE(std::isnan(v)) << std::hex << i;
      EXPECT_TRUE(is_nan_bits(f, narrow(v))) << std::hex << i;
      continue;
    }
    ASSERT_EQ(static_cast<double>(v), ref_decode(f, bits)) << std::hex << i;
    ASSERT_EQ(std::signbit(v), (bits & 0x8000u) != 0) << std::hex << i;
    ASSERT_EQ(narrow(v), bits) << std::hex << i;
  }
}

TEST(HalfConversion, AllValuesRoundTrip) {
  check_all_values(half_format(), half_to_float, float_to_half);
}
TEST(Bf16Conversion, AllValuesRoundTrip) {
  check_all_values(bf16_format(), bf16_to_float, float_to_bf16);
}

// Narrowing agrees with the search reference on every tie (and its neighbours) and on a
// sweep across all float bit patterns.
void check_narrowing(const Format& f, uint16_t (*narrow)(float)) {
  auto check = [&](float x) {
    const uint16_t got = narrow(x);
    const uint16_t want = ref_round(f, x);
    if (std::isnan(x)) {
      ASSERT_TRUE(is_quiet_nan_bits(f, got)) << std::hex << fbits(x);
    } else {
      ASSERT_EQ(got, want) << std::hex << "float bits " << fbits(x);
    }
  };
  for (uint32_t lo = 0; lo + 1 < f.values.size() && !::testing::Test::HasFailure(); ++lo) {
    const auto mid = static_cast<float>((f.values[lo] + f.values[lo + 1]) / 2);  // exact
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      check(x);
      check(-x);
    }
  }
  for (uint64_t u = 0; u <= 0xffffffffu && !::testing::Test::HasFailure(); u += 2039) {
    check(std::bit_cast<float>(static_cast<uint32_t>(u)));
  }
}

TEST(HalfConversion, NarrowingMatchesReference) { check_narrowing(half_format(), float_to_half); }
TEST(Bf16Conversion, NarrowingMatchesReference) { check_narrowing(bf16_format(), float_to_bf16); }

// ---- Kernels ----------------------------------------------------------------------------

enum class Kind { sum, sum_div, divide };
enum class Alias { none, dst_is_a, dst_is_b };

const char* kind_name(Kind k) {
  return k == Kind::sum ? "reduce_sum" : k == Kind::sum_div ? "reduce_sum_div" : "divide";
}
const char* alias_name(Alias a) {
  return a == Alias::none ? "separate" : a == Alias::dst_is_a ? "dst==a" : "dst==b";
}

// Elements are handled as raw bits: uint32_t for f32, uint16_t widened to uint32_t otherwise.
uint32_t random_element(DType t, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-8.0f, 8.0f);
  const bool any_bits = (rng() & 3) == 0;  // a quarter: any bit pattern (NaN, inf, subnormal)
  switch (t) {
    case DType::f32: return any_bits ? static_cast<uint32_t>(rng()) : fbits(value(rng));
    case DType::f16: return any_bits ? (rng() & 0xffff) : ref_round(half_format(), value(rng));
    case DType::bf16: return any_bits ? (rng() & 0xffff) : ref_round(bf16_format(), value(rng));
  }
  return 0;
}

float ref_widen(DType t, uint32_t bits) {
  const auto narrow = static_cast<uint16_t>(bits);
  switch (t) {
    case DType::f32: return std::bit_cast<float>(bits);
    case DType::f16: return static_cast<float>(ref_decode(half_format(), narrow));
    case DType::bf16: return static_cast<float>(ref_decode(bf16_format(), narrow));
  }
  return 0;
}

uint32_t ref_narrow(DType t, float v) {
  switch (t) {
    case DType::f32: return fbits(v);
    case DType::f16: return ref_round(half_format(), v);
    case DType::bf16: return ref_round(bf16_format(), v);
  }
  return 0;
}

bool is_nan_element(DType t, uint32_t bits) {
  switch (t) {
    case DType::f32: return std::isnan(std::bit_cast<float>(bits));
    case DType::f16: return is_nan_bits(half_format(), static_cast<uint16_t>(bits));
    case DType::bf16: return is_nan_bits(bf16_format(), static_cast<uint16_t>(bits));
  }
  return false;
}

bool is_quiet_nan_element(DType t, uint32_t bits) {
  switch (t) {
    case DType::f32: return std::isnan(std::bit_cast<float>(bits)) && (bits & 0x400000u) != 0;
    case DType::f16: return is_quiet_nan_bits(half_format(), static_cast<uint16_t>(bits));
    case DType::bf16: return is_quiet_nan_bits(bf16_format(), static_cast<uint16_t>(bits));
  }
  return false;
}

// A typed buffer with canary elements around the `count` the kernel may touch: overwritten
// canaries fail the test, and under AddressSanitizer any access to them is reported.
struct Buffer {
  DType t;
  size_t offset;  // canary elements at the front; 1 also makes the start misaligned
  size_t count;
  std::vector<uint8_t> bytes;

  static constexpr size_t kCanary = 4;
  static constexpr uint8_t kCanaryByte = 0xa5;

  Buffer(DType type, size_t n, size_t skip)
      : t(type), offset(skip), count(n),
        bytes((skip + n + kCanary) * dtype_size(type), kCanaryByte) {
    poison(true);
  }
  ~Buffer() { poison(false); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void poison(bool on) {
    const size_t head = offset * dtype_size(t);
    const size_t tail = (offset + count) * dtype_size(t);
    if (on) {
      RB_POISON(bytes.data(), head);
      RB_POISON(bytes.data() + tail, bytes.size() - tail);
    } else {
      RB_UNPOISON(bytes.data(), bytes.size());
    }
  }
  void* data() { return bytes.data() + offset * dtype_size(t); }
  uint32_t get(size_t i) const {
    uint32_t v = 0;
    std::memcpy(&v, bytes.data() + (offset + i) * dtype_size(t), dtype_size(t));
    return v;
  }
  void set(size_t i, uint32_t v) {
    std::memcpy(bytes.data() + (offset + i) * dtype_size(t), &v, dtype_size(t));
  }
  bool canaries_intact() {
    poison(false);
    const auto is_canary = [](uint8_t b) { return b == kCanaryByte; };
    const auto begin = bytes.begin() + static_cast<std::ptrdiff_t>(offset * dtype_size(t));
    const auto end = bytes.begin() + static_cast<std::ptrdiff_t>((offset + count) * dtype_size(t));
    const bool ok = std::all_of(bytes.begin(), begin, is_canary) &&
                    std::all_of(end, bytes.end(), is_canary);
    poison(true);
    return ok;
  }
};

class KernelTest : public ::testing::TestWithParam<std::tuple<const char*, DType>> {
 protected:
  void SetUp() override {
    const char* isa = std::get<0>(GetParam());
    if (!set_reduce_isa(isa)) GTEST_SKIP() << isa << " is not supported on this CPU/build";
    ASSERT_STREQ(reduce_isa(), isa);
  }
  void TearDown() override { set_reduce_isa("auto"); }

  void run_case(Kind kind, Alias alias, size_t count, size_t offset, float divisor,
                std::mt19937& rng) {
    const DType t = std::get<1>(GetParam());
    Buffer a(t, count, offset), b(t, count, offset), out(t, count, offset);
    std::vector<uint32_t> want(count);
    for (size_t i = 0; i < count; ++i) {
      a.set(i, random_element(t, rng));
      b.set(i, random_element(t, rng));
      float v = ref_widen(t, a.get(i));
      if (kind != Kind::divide) v += ref_widen(t, b.get(i));
      if (kind != Kind::sum) v /= divisor;
      want[i] = ref_narrow(t, v);
    }
    Buffer& dst = alias == Alias::dst_is_a ? a : alias == Alias::dst_is_b ? b : out;
    switch (kind) {
      case Kind::sum: reduce_sum(t, dst.data(), a.data(), b.data(), count); break;
      case Kind::sum_div:
        reduce_sum_div(t, dst.data(), a.data(), b.data(), count, divisor);
        break;
      case Kind::divide:
        // divide() reads `a` only; dst==a is the in-place case, dst==b a separate buffer.
        divide(t, dst.data(), a.data(), count, divisor);
        break;
    }
    const std::string where = std::string(kind_name(kind)) + " " + dtype_name(t) + " " +
                              reduce_isa() + " count=" + std::to_string(count) + " " +
                              alias_name(alias) + " offset=" + std::to_string(offset) +
                              " divisor=" + std::to_string(divisor);
    ASSERT_TRUE(dst.canaries_intact()) << where;
    for (size_t i = 0; i < count; ++i) {
      const uint32_t got = dst.get(i);
      if (is_nan_element(t, want[i])) {
        // NaN payloads depend on operand order, which the compiler may pick: check the kind.
        ASSERT_TRUE(is_quiet_nan_element(t, got)) << where << " i=" << i << std::hex
                                                  << " got=" << got;
      } else {
        ASSERT_EQ(got, want[i]) << where << " i=" << i << std::hex << " a=" << a.get(i)
                                << " b=" << b.get(i);
      }
    }
  }
};

TEST_P(KernelTest, MatchesScalarReferenceBitForBit) {
  std::mt19937 rng(20240611);
  // Around the AVX2 (16) and AVX-512 (32) steps, and long runs with a tail.
  for (size_t count : {0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 1000, 4099}) {
    for (size_t offset : {0, 1}) {
      for (Alias alias : {Alias::none, Alias::dst_is_a, Alias::dst_is_b}) {
        run_case(Kind::sum, alias, count, offset, 1.0f, rng);
        for (float divisor : {3.0f, 8.0f}) {
          run_case(Kind::sum_div, alias, count, offset, divisor, rng);
          run_case(Kind::divide, alias, count, offset, divisor, rng);
        }
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Sums that land exactly halfway between two narrow values: most same-exponent sums do.
class NarrowKernelTest : public KernelTest {};

TEST_P(NarrowKernelTest, TiesRoundToEven) {
  const DType t = std::get<1>(GetParam());
  const size_t n = 4099;
  std::vector<uint16_t> a(n), b(n), got(n);
  for (size_t i = 0; i < n; ++i) {
    const auto bits = static_cast<uint16_t>(0x3c00 + i % 1024);  // half [1, 2); bf16 [2^-7, 2)
    a[i] = bits;
    b[i] = static_cast<uint16_t>(bits ^ 1);  // odd sum of mantissas: a tie after the add
  }
  reduce_sum(t, got.data(), a.data(), b.data(), n);
  const Format& f = t == DType::f16 ? half_format() : bf16_format();
  for (size_t i = 0; i < n; ++i) {
    const float sum = static_cast<float>(ref_decode(f, a[i]) + ref_decode(f, b[i]));
    ASSERT_EQ(got[i], ref_round(f, sum)) << i;
  }
}

// narrow_floats and widen_to_floats (gradient compression): the scalar conversions' bits, in
// order, on every ISA, around the vector width and for NaN, infinities and subnormals.
TEST_P(NarrowKernelTest, ConversionsMatchTheScalarOnesInOrder) {
  const DType t = std::get<1>(GetParam());
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (size_t n : {0, 1, 15, 16, 17, 33, 1000}) {
    std::vector<float> src(n), back(n);
    for (size_t i = 0; i < n; ++i) src[i] = std::bit_cast<float>(any_bits(rng));
    if (n > 3) src[0] = 1.0f / 0.0f, src[1] = 1e-42f, src[2] = std::bit_cast<float>(0x7fc00001u);
    std::vector<uint16_t> narrow(n);
    narrow_floats(t, narrow.data(), src.data(), n);
    widen_to_floats(t, back.data(), narrow.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const uint16_t want = t == DType::f16 ? float_to_half(src[i]) : float_to_bf16(src[i]);
      ASSERT_EQ(narrow[i], want) << reduce_isa() << " n=" << n << " i=" << i;
      const float wide = t == DType::f16 ? half_to_float(want) : bf16_to_float(want);
      ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(wide)) << reduce_isa() << " i=" << i;
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<KernelTest::ParamType>& info) {
  return std::string(std::get<0>(info.param)) + "_" + dtype_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(AllIsas, KernelTest,
                         ::testing::Combine(::testing::Values("avx512", "avx2", "scalar"),
                                            ::testing::Values(DType::f32, DType::f16,
                                                              DType::bf16)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(AllIsas, NarrowKernelTest,
                         ::testing::Combine(::testing::Values("avx512", "avx2", "scalar"),
                                            ::testing::Values(DType::f16, DType::bf16)),
                         param_name);

// ---- Dispatch ---------------------------------------------------------------------------

TEST(ReduceIsa, SelectAndReset) {
  const std::string isa = reduce_isa();
  EXPECT_TRUE(isa == "avx512" || isa == "avx2" || isa == "scalar") << isa;
  EXPECT_FALSE(set_reduce_isa("sse9"));
  EXPECT_FALSE(set_reduce_isa(nullptr));
  EXPECT_STREQ(reduce_isa(), isa.c_str());
  ASSERT_TRUE(set_reduce_isa("scalar"));
  EXPECT_STREQ(reduce_isa(), "scalar");
  ASSERT_TRUE(set_reduce_isa("auto"));
  EXPECT_EQ(reduce_isa(), isa);
  const char* env = std::getenv("RINGBENCH_REDUCE_ISA");
  if (env != nullptr && *env != '\0' && std::string(env) != "auto") {
    EXPECT_EQ(isa, env);
  }
}

TEST(ReduceIsa, UnknownDTypeThrows) {
  float x = 1.0f;
  EXPECT_THROW(reduce_sum(static_cast<DType>(7), &x, &x, &x, 1), Error);
}

}  // namespace
}  // namespace ringbench
