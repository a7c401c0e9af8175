// StreamReducer: a message fed in pieces of every size, at every alignment, reduces to exactly
// what one reduce_sum (or reduce_sum_div) over the whole message gives.
#include "collectives/stream_reduce.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "collectives/reduce.h"

namespace ringbench {
namespace {

std::vector<char> random_bytes(size_t n, unsigned seed, DType t) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-8.f, 8.f);
  const size_t es = dtype_size(t);
  std::vector<char> v(n * es);
  for (size_t i = 0; i < n; ++i) {
    const float f = d(rng);
    if (t == DType::f32) std::memcpy(&v[i * es], &f, es);
    else {
      const uint16_t h = t == DType::f16 ? float_to_half(f) : float_to_bf16(f);
      std::memcpy(&v[i * es], &h, es);
    }
  }
  return v;
}

TEST(StreamReducer, PiecesOfAnySizeAndAlignmentGiveTheWholeMessagesResult) {
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (float divisor : {0.f, 3.f})
      for (size_t max_piece : {size_t{1}, size_t{5}, size_t{4099}, size_t{70000}}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " divisor " + std::to_string(divisor) + " pieces up to " +
                     std::to_string(max_piece));
        const size_t n = 20011, es = dtype_size(t);
        const auto a = random_bytes(n, 1, t), incoming = random_bytes(n, 2, t);
        std::vector<char> want(n * es), got(n * es, 0x55);
        if (divisor != 0) reduce_sum_div(t, want.data(), a.data(), incoming.data(), n, divisor);
        else reduce_sum(t, want.data(), a.data(), incoming.data(), n);
        StreamReducer sink(t, got.data(), a.data(), divisor);
        // Each piece is copied to an odd offset of a buffer first, so most arrive misaligned.
        std::vector<char> stage(max_piece + 1);
        std::mt19937 rng(3);
        for (size_t at = 0; at < incoming.size();) {
          const size_t k = std::min(incoming.size() - at, 1 + rng() % max_piece);
          const size_t shift = rng() % 2;
          std::memcpy(stage.data() + shift, incoming.data() + at, std::min(k, stage.size() - shift));
          const size_t fed = std::min(k, stage.size() - shift);
          sink(stage.data() + shift, fed);
          at += fed;
        }
        EXPECT_EQ(sink.elements_done(), n);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0);
      }
}

}  // namespace
}  // namespace ringbench
