// Ring and direct allreduce with threads as ranks over loopback TCP: every rank count 1..8,
// element counts that are empty, tiny, not divisible by the rank count and large, every dtype
// and op, in- and out-of-place, and ring segments small enough that even tiny inputs run
// through the pipeline.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collectives/allreduce.h"
#include "collectives/verify.h"
#include "tests/rank_threads.h"

namespace ringbench {
namespace {

struct Case {
  int ranks;
  DType dtype;
};

class RingThreads : public ::testing::TestWithParam<Case> {};

TEST_P(RingThreads, ExactForAllShapes) {
  const auto [n, dtype] = GetParam();
  const size_t es = dtype_size(dtype);
  const std::vector<size_t> counts = {0, 1, 7, 1000, (size_t{1} << 20) + 3};
  testing::run_ranks(n, [&](Transport& t) {
    for (size_t count : counts) {
      // Tiny segments (a few elements) only where the message count stays reasonable.
      std::vector<size_t> seg_bytes = {1 << 20};
      if (count <= 1000) {
        seg_bytes = {es, 3 * es, 64, 1 << 20};
      } else {
        seg_bytes.push_back(64 << 10);
      }
      seg_bytes.push_back(0);  // 0: the direct algorithm instead of the ring
      for (size_t seg : seg_bytes)
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg})
          for (bool inplace : {false, true}) {
            SCOPED_TRACE("rank " + std::to_string(t.rank()) + " count " + std::to_string(count) +
                         (seg ? " ring seg " + std::to_string(seg) : std::string(" direct")) +
                         " " + op_name(op) + (inplace ? " in-place" : " out-of-place"));
            std::vector<char> in(count * es + 1), out(count * es + 1, 0x5a);
            fill_input(dtype, in.data(), count, t.rank(), n);
            AllreduceOptions ao;
            ao.algo = seg ? AllreduceAlgo::ring : AllreduceAlgo::direct;
            ao.ring.segment_bytes = seg ? seg : 1 << 20;
            ao.ring.timeout = std::chrono::seconds(30);
            Allreduce ar(t, in.data(), inplace ? in.data() : out.data(), count, dtype, op, ao);
            EXPECT_EQ(ar.run(count), ao.algo);
            const char* res = inplace ? in.data() : out.data();
            EXPECT_EQ(count_wrong(dtype, res, count, n, op), 0u);
            if (!inplace) {
              EXPECT_EQ(out[count * es], 0x5a) << "wrote past the end";
            }
          }
    }
  });
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (int n = 1; n <= 8; ++n)
    for (DType d : {DType::f32, DType::f16, DType::bf16}) v.push_back({n, d});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingThreads, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return std::to_string(p.param.ranks) + "ranks_" +
                                  dtype_name(p.param.dtype);
                         });

// A ring set up for a large buffer runs smaller counts too, repeatedly (sweeps do this).
TEST(RingThreadsReuse, SmallerCountsOnOneSetup) {
  testing::run_ranks(4, [&](Transport& t) {
    const size_t max = 50000;
    std::vector<float> in(max), out(max);
    RingOptions ro;
    ro.segment_bytes = 4096;
    RingAllreduce ring(t, in.data(), out.data(), max, DType::f32, ReduceOp::sum, ro);
    for (size_t count : {max, size_t{3}, size_t{0}, size_t{12345}, max}) {
      fill_input(DType::f32, in.data(), count, t.rank(), 4);
      ring.run(count);
      EXPECT_EQ(count_wrong(DType::f32, out.data(), count, 4, ReduceOp::sum), 0u)
          << "count " << count;
    }
  });
}

}  // namespace
}  // namespace ringbench
