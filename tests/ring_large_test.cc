// Byte counts are 64-bit: an allreduce of a buffer over 2 GiB (more than 2^30 half elements)
// between two ranks is exact. Needs about 4.5 GiB of memory and a few seconds.
#include <gtest/gtest.h>

#include <memory>

#include "collectives/ring_allreduce.h"
#include "collectives/verify.h"
#include "tests/rank_threads.h"

namespace ringbench {
namespace {

TEST(RingLarge, BufferOverTwoGiB) {
  const size_t count = (size_t{1} << 30) + (size_t{1} << 20) + 5;  // 2 GiB + 2 MiB + 10 bytes
  testing::run_ranks(2, [&](Transport& t) {
    std::unique_ptr<uint16_t[]> data(new uint16_t[count]);
    fill_input(DType::f16, data.get(), count, t.rank(), 2);
    RingOptions ro;
    ro.segment_bytes = 4 << 20;
    RingAllreduce ring(t, data.get(), data.get(), count, DType::f16, ReduceOp::sum, ro);
    ring.run(count);
    EXPECT_EQ(count_wrong(DType::f16, data.get(), count, 2, ReduceOp::sum), 0u);
  });
}

}  // namespace
}  // namespace ringbench
