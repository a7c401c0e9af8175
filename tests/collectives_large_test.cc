// Byte counts are 64-bit for the four collectives beside the allreduce (ring_large_test's): each
// is exact at a size over 2 GiB in the size column (allgather's gathered total, reducescatter's
// and alltoall's whole input per rank, broadcast's buffer), between two thread ranks over
// loopback TCP, in f16. The inputs, where they lie and the checks are the descriptors' (runner/
// backends/ops/), as `ringbench <op> -c 1` runs them; the algorithms are set up on buffers as
// large as their layouts need, no larger. One layout each, the one that puts the most past 2^31
// bytes: in place (allgather's input at out + rank x block, reducescatter's result there), and
// one rank in each layout for broadcast (the root out of place, sending its whole buffer as one
// TCP message of 2 GiB + 2 MiB) and alltoall. Peak memory, both ranks together: 4.0 GiB
// (allgather, reducescatter), 6.0 GiB (broadcast), 7.0 GiB (alltoall). Most of the time is the
// fill and the check of 2^30 elements a rank; see docs/collectives.md for the times measured.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>

#include "collectives/chain_broadcast.h"
#include "collectives/direct_alltoall.h"
#include "collectives/ring_allgather.h"
#include "collectives/ring_reducescatter.h"
#include "runner/backends/collective.h"
#include "tests/rank_threads.h"

namespace ringbench {
namespace {

constexpr int kRanks = 2;
constexpr DType kType = DType::f16;
constexpr size_t kCount = (size_t{1} << 30) + (size_t{1} << 20) + 4;  // 2 GiB + 2 MiB + 8 bytes of f16
constexpr size_t kBlock = kCount / kRanks;                             // past 1 GiB

using Elems = std::unique_ptr<uint16_t[]>;
Elems elems(size_t n) { return Elems(new uint16_t[n]); }  // its pages are touched by the fill

RingOptions options(size_t segment_bytes = 4 << 20) {
  RingOptions o;
  o.segment_bytes = o.min_segment_bytes = segment_bytes;
  o.timeout = std::chrono::seconds(120);  // a loaded machine moving gigabytes
  return o;
}

// One checked run as `ringbench <op> -c 1` does it: the result's place poisoned (NaN), this
// rank's input where the layout puts it (`out` in place), `run`, and the wrong elements.
uint64_t run_checked(const char* op, int rank, uint16_t* in, uint16_t* out, bool inplace,
                     const std::function<void()>& run) {
  const Collective& c = find_collective(op);
  const CollectiveLayout at = c.layout(kCount, rank, kRanks, inplace);
  std::memset(out + at.out_offset, 0xff, at.out_count * sizeof(uint16_t));
  c.fill(kType, (inplace ? out : in) + at.in_offset, at.in_count, rank, kRanks);
  run();
  return c.check(kType, out + at.out_offset, at.out_count, rank, kRanks, ReduceOp::sum);
}

TEST(CollectivesLarge, AllgatherInPlaceOverTwoGiB) {
  testing::run_ranks(kRanks, [&](Transport& t) {
    const Elems out = elems(kCount);
    RingAllgather in_place(t, out.get(), out.get(), kBlock, kType, options());
    EXPECT_EQ(run_checked("allgather", t.rank(), nullptr, out.get(), true, [&] { in_place.run(kBlock); }), 0u);
  });
}

TEST(CollectivesLarge, ReducescatterInPlaceOverTwoGiB) {
  testing::run_ranks(kRanks, [&](Transport& t) {
    const Elems buf = elems(kCount);
    RingReduceScatter in_place(t, buf.get(), buf.get(), kBlock, kType, ReduceOp::sum, options());
    EXPECT_EQ(run_checked("reducescatter", t.rank(), nullptr, buf.get(), true, [&] { in_place.run(kBlock); }), 0u);
  });
}

// Rank 0 out of place (it copies its input and sends from it) while rank 1 receives in place
// (out of place it would do the same), the whole buffer as one message.
TEST(CollectivesLarge, BroadcastOverTwoGiBInOneMessage) {
  testing::run_ranks(kRanks, [&](Transport& t) {
    const bool root = t.rank() == 0;
    const Elems out = elems(kCount), in = root ? elems(kCount) : nullptr;
    uint16_t* input = root ? in.get() : out.get();
    ChainBroadcast whole(t, input, out.get(), kCount, kType, options(size_t{4} << 30));
    EXPECT_EQ(run_checked("broadcast", t.rank(), input, out.get(), !root, [&] { whole.run(kCount); }), 0u);
  });
}

// Rank 0 out of place (its blocks go straight from its input) while rank 1 runs in place (a copy
// of the block it sends is its scratch), so that both layouts move a block of 1 GiB + 1 MiB as
// one message, from and to offsets past 1 GiB.
TEST(CollectivesLarge, AlltoallOverTwoGiBOutOfPlaceAndInPlace) {
  testing::run_ranks(kRanks, [&](Transport& t) {
    const bool inplace = t.rank() == 1;
    const Elems out = elems(kCount), in = inplace ? nullptr : elems(kCount);
    uint16_t* input = inplace ? out.get() : in.get();
    DirectAlltoall alltoall(t, input, out.get(), kBlock, kType, options());
    EXPECT_EQ(run_checked("alltoall", t.rank(), input, out.get(), inplace, [&] { alltoall.run(kBlock); }), 0u);
  });
}

}  // namespace
}  // namespace ringbench
