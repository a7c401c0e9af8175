// Every registered collective but allreduce (ring_threads_test's) with threads as ranks over
// loopback TCP, through its descriptor as `ringbench <collective>` runs it: exact at N = 2, 3,
// 4, 5, 8 for counts from 0 up, with segments of a few elements so that even tiny inputs run
// through the pipeline, in place and out of place, reducing ones for every op and a 16-bit
// dtype; nothing written past the result; a plan set up for 0 elements; and the check itself
// catches one wrong element.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/errors.h"
#include "collectives/tag.h"
#include "collectives/verify.h"
#include "runner/backends/collective.h"
#include "tests/rank_threads.h"

namespace ringbench {
namespace {

struct Case {
  std::string collective;
  int ranks;
};

class CollectiveThreads : public ::testing::TestWithParam<Case> {};

// One run of `c` on this rank: fill, run, check; returns the wrong elements. The output's
// elements past the result and the input stay as they were.
uint64_t run_once(const Collective& c, Transport& t, CollectivePlan& plan, std::vector<char>& in,
                  std::vector<char>& out, size_t count, DType dtype, ReduceOp op, bool inplace) {
  const int n = t.size(), r = t.rank();
  const size_t es = dtype_size(dtype);
  const CollectiveLayout at = c.layout(count, r, n, inplace);
  std::memset(out.data(), 0x5a, out.size());
  c.fill(dtype, (inplace ? out.data() : in.data()) + at.in_offset * es, at.in_count, r, n);
  const std::vector<char> input_before = in;
  plan.run(count, inplace);
  EXPECT_EQ(in, input_before) << "the input was written";
  EXPECT_EQ(out.back(), 0x5a) << "wrote past the end";
  return c.check(dtype, out.data() + at.out_offset * es, at.out_count, r, n, op);
}

// A plan set up for no elements at all (no buffers to register) runs 0 elements, both ways; one
// with a pipeline depth of 0 is refused.
void set_up_for_nothing(const Collective& c, Transport& t) {
  std::vector<char> in(1), out(1);
  PlanArgs a{in.data(), out.data(), 0, DType::f32, ReduceOp::sum, {}};
  auto plan = c.ring(t, a);
  EXPECT_EQ(run_once(c, t, *plan, in, out, 0, DType::f32, ReduceOp::sum, false), 0u);
  if (c.name != "alltoall") {  // the ring and chain pipelines post `depth` receives ahead
    PlanArgs no_depth = a;
    no_depth.options.ring.depth = 0;
    EXPECT_THROW(c.ring(t, no_depth), Error) << "depth 0";
  }
  EXPECT_EQ(run_once(c, t, *plan, in, out, 0, DType::f32, ReduceOp::sum, true), 0u);
}

// A result with one element changed, and one never written, are caught by the check.
void check_catches_a_wrong_element(const Collective& c, Transport& t) {
  const int n = t.size();
  const size_t count = c.round_count(64 * static_cast<size_t>(n), n);
  std::vector<float> in(count), out(count);
  PlanArgs a{in.data(), out.data(), count, DType::f32, ReduceOp::sum, {}};
  auto plan = c.ring(t, a);
  const CollectiveLayout at = c.layout(count, t.rank(), n, false);
  c.fill(DType::f32, in.data() + at.in_offset, at.in_count, t.rank(), n);
  plan->run(count, false);
  ASSERT_EQ(c.check(DType::f32, out.data() + at.out_offset, at.out_count, t.rank(), n, ReduceOp::sum), 0u);
  out[at.out_offset + at.out_count - 1] += 1;
  EXPECT_EQ(c.check(DType::f32, out.data() + at.out_offset, at.out_count, t.rank(), n, ReduceOp::sum), 1u);
  std::memset(out.data(), 0xff, out.size() * sizeof(float));
  EXPECT_EQ(c.check(DType::f32, out.data() + at.out_offset, at.out_count, t.rank(), n, ReduceOp::sum), at.out_count);
}

// One job per case (a transport's teardown takes up to a heartbeat: fewer, longer tests).
TEST_P(CollectiveThreads, ExactForAllShapes) {
  const Collective& c = find_collective(GetParam().collective);
  const int n = GetParam().ranks;
  const size_t un = static_cast<size_t>(n);
  const std::vector<size_t> counts = {0, un, 7 * un, 1000 * un + un / 2, ((size_t{1} << 13) + 3) * un};
  const size_t max_count = counts.back();
  std::vector<DType> dtypes = {DType::f32};
  if (c.reduces) dtypes.push_back(DType::bf16);
  TcpOptions tcp;
  tcp.timeout = std::chrono::seconds(4);  // heartbeats every 0.5 s
  testing::run_ranks(n, [&](Transport& t) {
    set_up_for_nothing(c, t);
    check_catches_a_wrong_element(c, t);
    for (DType dtype : dtypes)
      for (ReduceOp op : c.reduces ? std::vector<ReduceOp>{ReduceOp::sum, ReduceOp::avg} : std::vector<ReduceOp>{ReduceOp::sum})
        for (size_t seg : {size_t{3}, size_t{1} << 20}) {
          const size_t es = dtype_size(dtype);
          std::vector<char> in(max_count * es + 1), out(max_count * es + 1);
          PlanArgs a{in.data(), out.data(), max_count, dtype, op, {}};
          a.options.ring.segment_bytes = seg * es;
          a.options.ring.min_segment_bytes = seg * es;
          a.options.ring.timeout = std::chrono::seconds(30);
          auto plan = c.ring(t, a);
          for (size_t raw : counts) {
            const size_t count = c.round_count(raw, n);
            if (seg == 3 && count > 7 * un) continue;  // thousands of tiny messages: slow, adds nothing
            for (bool inplace : {false, true}) {
              SCOPED_TRACE("rank " + std::to_string(t.rank()) + " count " + std::to_string(count) + " " +
                           dtype_name(dtype) + " " + op_name(op) + " segment " + std::to_string(seg) +
                           (inplace ? " in place" : " out of place"));
              EXPECT_EQ(run_once(c, t, *plan, in, out, count, dtype, op, inplace), 0u);
            }
          }
        }
  }, tcp);
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (const Collective* c : collectives())
    if (c->ring)
      for (int n : {2, 3, 4, 5, 8}) v.push_back({c->name, n});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectiveThreads, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           return p.param.collective + "_" + std::to_string(p.param.ranks) + "ranks";
                         });

// The non-reducing collectives' checks at count = n (one element a block), in the 16-bit dtypes
// where a hash masked for exact sums has only a few values: every swap of two blocks, and a
// broadcast rank that kept its own input, are wrong in every element they touch.
TEST(CollectiveChecks, ASwappedBlockOrAKeptInputIsCaughtAtOneElementABlock) {
  for (DType dtype : {DType::bf16, DType::f16, DType::f32})
    for (int n : {8, 64}) {
      const size_t un = static_cast<size_t>(n), es = dtype_size(dtype);
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " at " + std::to_string(n) + " ranks");
      std::vector<std::vector<char>> inputs(un, std::vector<char>(un * es));
      for (int r = 0; r < n; ++r) find_collective("allgather").fill(dtype, inputs[size_t(r)].data(), un, r, n);
      // allgather's result on any rank: rank b's one element at b. alltoall's on rank 1: rank b's element 1.
      for (const char* name : {"allgather", "alltoall"}) {
        const Collective& c = find_collective(name);
        std::vector<char> result(un * es);
        for (size_t b = 0; b < un; ++b)
          std::memcpy(result.data() + b * es, inputs[b].data() + (std::string(name) == "allgather" ? 0 : es), es);
        ASSERT_EQ(c.check(dtype, result.data(), un, 1, n, ReduceOp::sum), 0u) << name;
        for (size_t a = 0; a < un; ++a)
          for (size_t b = a + 1; b < un; ++b) {
            std::vector<char> swapped = result;
            std::memcpy(swapped.data() + a * es, result.data() + b * es, es);
            std::memcpy(swapped.data() + b * es, result.data() + a * es, es);
            ASSERT_EQ(c.check(dtype, swapped.data(), un, 1, n, ReduceOp::sum), 2u) << name << " blocks " << a << ", " << b;
          }
      }
      const Collective& bc = find_collective("broadcast");
      for (int r = 0; r < n; ++r) {
        bc.fill(dtype, inputs[size_t(r)].data(), un, r, n);
        EXPECT_EQ(bc.check(dtype, inputs[size_t(r)].data(), un, r, n, ReduceOp::sum), r == 0 ? 0u : un) << "rank " << r;
      }
    }
}

// Past 2^14 (index x ranks + rank) the 16-bit values are a hash, not a pattern that repeats: a
// block moved by a multiple of the pattern's period (2^13 elements at 2 ranks; 2^31 would be a
// byte count cut to 32 bits) is wrong in nearly every element, and one in place is not.
TEST(CollectiveChecks, ABlockMovedByThePatternsPeriodIsCaught) {
  const size_t period = size_t{1} << 13, count = 4 * period;
  std::vector<uint16_t> data(count);
  fill_distinct(DType::f16, data.data(), count, 0, 2);
  EXPECT_EQ(count_unlike_distinct(DType::f16, data.data() + period, count - period, period, 0, 2), 0u);
  const size_t moved = count_unlike_distinct(DType::f16, data.data() + period, 2 * period, 2 * period, 0, 2);
  EXPECT_GT(moved, 2 * period * 99 / 100) << "of " << 2 * period;
}

// In place the result's place holds the input when the run starts (the NaN pre-fill is
// overwritten), so a collective that did nothing must still be caught: on every rank but
// broadcast's root, every element that is not the rank's own block is wrong.
TEST(CollectiveChecks, ANoOpInPlaceIsReportedWrong) {
  const int n = 4;
  for (const Collective* c : collectives()) {
    const size_t count = c->round_count(64 * n, n);
    for (int r = 0; r < n; ++r) {
      SCOPED_TRACE(c->name + " rank " + std::to_string(r));
      const CollectiveLayout at = c->layout(count, r, n, true);
      std::vector<float> out(std::max(at.in_offset + at.in_count, at.out_offset + at.out_count));
      std::memset(out.data(), 0xff, out.size() * sizeof(float));
      c->fill(DType::f32, out.data() + at.in_offset, at.in_count, r, n);
      const uint64_t wrong = c->check(DType::f32, out.data() + at.out_offset, at.out_count, r, n, ReduceOp::sum);
      if (c->name == "broadcast" && r == 0)
        EXPECT_EQ(wrong, 0u);  // the root's input is its result
      else
        EXPECT_GE(wrong, at.out_count - at.out_count / static_cast<size_t>(n));
    }
  }
}

// An unsegmented transfer's wait grows with its bytes: halving-doubling's first exchange of 4 GiB
// takes ~34 s at 1 Gbit/s, far past 2 x --timeout 10, on a live link.
TEST(CollectiveTimeouts, AWaitGrowsWithTheBytesItWaitsFor) {
  using std::chrono::milliseconds;
  EXPECT_EQ(transfer_timeout(milliseconds(10000), 0), milliseconds(10000));
  const size_t four_gib = size_t{4} << 30;
  EXPECT_GT(transfer_timeout(milliseconds(10000), four_gib), milliseconds(10000 + 34000 * 2));
}

// The bus-bandwidth factors nccl-tests' PERFORMANCE.md defines.
TEST(CollectiveDescriptors, BusbwFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(find_collective("allreduce").busbw_factor(4), 1.5);
  EXPECT_DOUBLE_EQ(find_collective("allgather").busbw_factor(4), 0.75);
  EXPECT_DOUBLE_EQ(find_collective("reducescatter").busbw_factor(8), 0.875);
  EXPECT_DOUBLE_EQ(find_collective("broadcast").busbw_factor(5), 1.0);
  EXPECT_DOUBLE_EQ(find_collective("alltoall").busbw_factor(2), 0.5);
  EXPECT_THROW(find_collective("gather"), Error);
}

TEST(CollectiveDescriptors, EveryOneIsComplete) {
  ASSERT_GE(collectives().size(), 5u);
  for (const Collective* c : collectives()) {
    SCOPED_TRACE(c->name);
    EXPECT_TRUE(c->busbw_factor && c->round_count && c->layout && c->fill && c->check);
    EXPECT_TRUE(c->native || c->ring) << "no way to run it";
  }
}

}  // namespace
}  // namespace ringbench
