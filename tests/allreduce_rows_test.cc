// What rank 0 reads back from the store for an allreduce row is checked before use: a forged,
// truncated, oversized or empty value is an error naming its key and sender, never a crash or a
// silently wrong row.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>

#include "base/errors.h"
#include "collectives/store.h"
#include "runner/cli/allreduce_rows.h"
#include "runner/backends/collective.h"
#include "runner/job/world.h"

namespace ringbench {
namespace {

std::string error_of(const std::string& value, int iters = 3, size_t count = 1024) {
  try {
    unpack(value, "allreduce/point/0/1", 1, iters, count);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(AllreduceRows, PackedMeasurementsRoundTrip) {
  const Measured m{2, {10.0, 20.0, 30.0}, 17.5};
  const Measured back = unpack(pack(m), "k", 0, 3, 1024);
  EXPECT_EQ(back.wrong, 2u);
  EXPECT_EQ(back.us, m.us);
  EXPECT_EQ(back.cpu_us, 17.5);
}

TEST(AllreduceRows, ValuesOfTheWrongSizeNameTheKeyAndSender) {
  const std::string good = pack(Measured{0, {1.0, 2.0, 3.0}});
  for (const std::string& bad : {std::string(), good.substr(0, 7), good + std::string(1 << 20, 'x'), good + "1"}) {
    const std::string e = error_of(bad);
    EXPECT_NE(e.find("store key allreduce/point/0/1 (from rank 1)"), std::string::npos) << e;
    EXPECT_NE(e.find("expected 40 bytes (3 timings), got " + std::to_string(bad.size())), std::string::npos) << e;
  }
}

TEST(AllreduceRows, TimingsAndCountsOutOfRangeAreRefused) {
  for (double t : {-1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(), 1e13}) {
    const std::string e = error_of(pack(Measured{0, {1.0, t, 3.0}}));
    EXPECT_NE(e.find("is not a duration"), std::string::npos) << t << ": " << e;
  }
  EXPECT_NE(error_of(pack(Measured{1025, {1.0, 2.0, 3.0}})).find("1025 wrong elements of 1024"), std::string::npos);
  for (double c : {-1.0, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(), 1e13}) {
    const std::string e = error_of(pack(Measured{0, {1.0, 2.0, 3.0}, c}));
    EXPECT_NE(e.find("CPU time"), std::string::npos) << c << ": " << e;
    EXPECT_NE(e.find("is not a duration"), std::string::npos) << c << ": " << e;
  }
}

TEST(AllreduceRows, SummaryIsTheSlowestRank) {
  const Row r = summarize({Measured{0, {10, 30}, 8}, Measured{1, {20, 20}, 12}}, 1000,
                          find_collective("allreduce").busbw_factor(2));
  EXPECT_DOUBLE_EQ(r.time_us, 20);  // both means are 20
  EXPECT_DOUBLE_EQ(r.cpu_us, 10);   // the ranks' mean CPU time
  EXPECT_DOUBLE_EQ(r.p50_us, 25);   // of the per-iteration maxima 20 and 30
  EXPECT_EQ(r.wrong, 1u);
  EXPECT_DOUBLE_EQ(r.algbw, 1000.0 / 20 / 1e3);
  EXPECT_DOUBLE_EQ(r.busbw, r.algbw);  // 2(n-1)/n = 1 for n = 2
  EXPECT_DOUBLE_EQ(find_collective("allreduce").busbw_factor(4), 1.5);
  EXPECT_THROW(summarize({Measured{0, {10, 30}}, Measured{0, {20}}}, 1000, 1.0), Error);
}

// A rank that never publishes what the others wait for (stopped before it got there) is named
// in the timeout, on every rank that waits for it.
TEST(RankValues, AWaitForARankThatNeverPublishesNamesIt) {
  InProcStore store;
  store.set("allreduce/shape/1", "ok");
  EXPECT_EQ(get_from_rank(store, "allreduce/shape/1", 1, std::chrono::milliseconds(100)), "ok");
  try {
    get_from_rank(store, "allreduce/shape/2", 2, std::chrono::milliseconds(100));
    ADD_FAILURE() << "returned without the key";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(e.peer(), 2);
    EXPECT_EQ(std::string(e.what()).rfind("rank 2 did not publish allreduce/shape/2: it is stopped, dead, or has not "
                                          "got this far (timed out after 0.1 s waiting for key",
                                          0),
              0u)
        << e.what();
  }
}

}  // namespace
}  // namespace ringbench
