// Ring, direct, recursive-doubling and halving-doubling allreduce with threads as ranks over loopback TCP: every rank count 1..8,
// element counts that are empty, tiny, not divisible by the rank count and large, every dtype
// and op, in- and out-of-place, and ring segments small enough that even tiny inputs run
// through the pipeline.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "collectives/allreduce.h"
#include "base/errors.h"
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
  const int n = GetParam().ranks;  // not a structured binding: lambdas capture these (clang 14)
  const DType dtype = GetParam().dtype;
  const size_t es = dtype_size(dtype);
  // The large count is 2^18 + 3 (1 MiB of f32): with 16 KiB segments every rank's chunk is
  // several segments and uneven at every rank count, as 2^20 + 3 with 64 KiB was at 4x the time.
  const std::vector<size_t> counts = {0, 1, 7, 1000, (size_t{1} << 18) + 3};
  testing::run_ranks(n, [&](Transport& t) {
    for (size_t count : counts) {
      // Ring runs with tiny segments (a few elements) only where the message count stays
      // reasonable; then the small-message algorithms (recursive doubling for 2^k ranks).
      struct Run {
        AllreduceAlgo algo;
        size_t seg;
      };
      std::vector<Run> runs = {{AllreduceAlgo::ring, 1 << 20}, {AllreduceAlgo::direct, 1 << 20}};
      if (count <= 1000) {
        for (size_t seg : {es, 3 * es, size_t{64}}) runs.push_back({AllreduceAlgo::ring, seg});
      } else {
        runs.push_back({AllreduceAlgo::ring, 16 << 10});
      }
      if ((n & (n - 1)) == 0) runs.push_back({AllreduceAlgo::rd, 1 << 20});
      runs.push_back({AllreduceAlgo::hd, 1 << 20});  // every rank count: non-powers of two fold in
      for (const Run& run : runs)
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg})
          for (bool inplace : {false, true}) {
            SCOPED_TRACE("rank " + std::to_string(t.rank()) + " count " + std::to_string(count) +
                         " " + algo_name(run.algo) + " seg " + std::to_string(run.seg) + " " +
                         op_name(op) + (inplace ? " in-place" : " out-of-place"));
            std::vector<char> in(count * es + 1), out(count * es + 1, 0x5a);
            fill_input(dtype, in.data(), count, t.rank(), n);
            AllreduceOptions ao;
            ao.algo = run.algo;
            ao.ring.segment_bytes = run.seg;
            ao.ring.timeout = std::chrono::seconds(30);
            Allreduce ar(t, in.data(), inplace ? in.data() : out.data(), count, dtype, op, ao);
            EXPECT_STREQ(ar.run(count), algo_name(ao.algo));
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

// Halving-doubling on a part of its buffer (offset > 0), as training's bucketed reducer runs it:
// that part reduced exactly, the rest untouched, at a rank count that folds and at one that does not.
TEST(RingThreadsReuse, HalvingDoublingOnAPartOfItsBuffer) {
  for (int n : {3, 4})
    testing::run_ranks(n, [&](Transport& t) {
      const size_t max = 3000, offset = 1001, count = 1237;
      std::vector<float> all(max), in(max, -1.0f), out(max, -2.0f);
      fill_input(DType::f32, all.data(), count, t.rank(), n);
      std::copy(all.begin(), all.begin() + count, in.begin() + offset);
      AllreduceOptions ao;
      ao.algo = AllreduceAlgo::hd;
      for (bool inplace : {false, true}) {
        std::vector<float> src = in, dst = out;
        Allreduce ar(t, src.data(), inplace ? src.data() : dst.data(), max, DType::f32, ReduceOp::sum, ao);
        ar.run(count, offset);
        const std::vector<float>& res = inplace ? src : dst;
        EXPECT_EQ(count_wrong(DType::f32, res.data() + offset, count, n, ReduceOp::sum), 0u) << n << " ranks";
        const float untouched = inplace ? -1.0f : -2.0f;
        for (size_t i = 0; i < max; ++i) {
          if (i < offset || i >= offset + count) {
            ASSERT_EQ(res[i], untouched) << "element " << i << " at " << n << " ranks";
          }
        }
      }
    });
}

// Ranks that disagree on the offset fail loudly (the tag names it) instead of adding each
// other's wrong elements.
TEST(RingThreadsReuse, HalvingDoublingRanksOnOtherOffsetsFail) {
  testing::run_ranks(2, [&](Transport& t) {
    std::vector<float> in(64, 1.0f), out(64);
    AllreduceOptions ao;
    ao.algo = AllreduceAlgo::hd;
    Allreduce ar(t, in.data(), out.data(), in.size(), DType::f32, ReduceOp::sum, ao);
    EXPECT_THROW(ar.run(32, t.rank() == 0 ? 0 : 8), IoError);
  });
}

TEST(RingThreadsReuse, RecursiveDoublingNeedsPowerOfTwoRanks) {
  testing::run_ranks(3, [&](Transport& t) {
    std::vector<float> buf(16);
    AllreduceOptions ao;
    ao.algo = AllreduceAlgo::rd;
    EXPECT_THROW(Allreduce(t, buf.data(), buf.data(), buf.size(), DType::f32, ReduceOp::sum, ao),
                 Error);
  });
}

}  // namespace
}  // namespace ringbench
