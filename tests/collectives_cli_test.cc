// `ringbench allgather|reducescatter|broadcast|alltoall` end to end: local ranks, the table and
// JSON of `ringbench allreduce`, exact rows, counts rounded to a multiple of the ranks where the
// blocks are per rank, nccl-tests' busbw factors; `allreduce --algo hd` at a rank count that is
// not a power of two; options that do not apply are clear errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <map>
#include <string>

#include "tests/run_command.h"

namespace ringbench {
namespace {

using testing::has_all;
using testing::run_command;
using testing::run_json;

const std::string kBin = RINGBENCH_BIN;

// The busbw factor at 3 ranks, whether counts are a multiple of the ranks, and the TCP sockets
// per peer by default (alltoall: one, as it has a flow per peer already).
struct Expect {
  double factor;
  bool per_rank;
  int sockets;
};
const std::map<std::string, Expect> kCollectives = {
    {"allgather", {2.0 / 3, true, 2}}, {"reducescatter", {2.0 / 3, true, 2}},
    {"broadcast", {1.0, false, 2}},    {"alltoall", {2.0 / 3, true, 1}}};

class CollectiveCli : public ::testing::TestWithParam<std::string> {};

TEST_P(CollectiveCli, LocalRanksAreExactWithNcclTestsBusbw) {
  const std::string name = GetParam();
  const Expect e = kCollectives.at(name);
  auto [code, output, doc] = run_json(kBin + " " + name + " --ranks 3 -b 0 -e 256K -f 8 -n 2 -w 1 --timeout 10");
  ASSERT_EQ(code, 0) << output;
  const std::string sockets = std::to_string(e.sockets);
  EXPECT_TRUE(has_all(output, {"# ringbench", " " + name + ": ours over tcp, 3 ranks", "# Out of bounds values : 0 OK",
                               "--sockets-per-peer " + sockets, " sockets_per_peer=" + sockets + " "}));
  EXPECT_EQ(doc["meta"]["collective"], name);
  ASSERT_EQ(doc["rows"].size(), 16u);  // 0, 4, 32, 256, 2K, 16K, 128K, 256K bytes: out of place and in place
  for (auto& row : doc["rows"]) {
    EXPECT_EQ(row["wrong"], 0) << row;
    if (e.per_rank) {
      EXPECT_EQ(row["count"].get<size_t>() % 3, 0u) << row;
    }
    EXPECT_NEAR(row["busbw_gbps"].get<double>(), row["algbw_gbps"].get<double>() * e.factor, 1e-9);
  }
}

TEST_P(CollectiveCli, OverSharedMemoryToo) {
  auto [code, output, doc] =
      run_json(kBin + " " + GetParam() + " --ranks 4 --transport shm -b 1K -e 1M -f 32 -n 2 -w 1 --timeout 10");
  ASSERT_EQ(code, 0) << output;
  EXPECT_EQ(doc["meta"]["transport"], "shm");
  for (auto& row : doc["rows"]) EXPECT_EQ(row["wrong"], 0) << row;
}

INSTANTIATE_TEST_SUITE_P(Each, CollectiveCli,
                         ::testing::Values("allgather", "reducescatter", "broadcast", "alltoall"));

TEST(CollectiveCliHd, HalvingDoublingIsExactAtFiveRanks) {
  auto [code, output, doc] =
      run_json(kBin + " allreduce --algo hd --ranks 5 -b 0 -e 1M -f 16 -n 2 -w 1 -o avg --timeout 10");
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(has_all(output, {"# algorithm per row: hd", "# Out of bounds values : 0 OK"}));
  for (auto& row : doc["rows"]) {
    EXPECT_EQ(row["wrong"], 0) << row;
    EXPECT_EQ(row["algo"], "hd");
  }
}

TEST(CollectiveCliErrors, OptionsThatDoNotApplyAreClearErrors) {
  auto r = run_command(kBin + " allgather --ranks 2 --algo hd -e 4K");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has_all(r.output, {"--algo hd", "allgather has one algorithm per backend"})) << r.output;
  for (const char* op : {"allgather", "broadcast"}) {  // once a null receive dereferenced: SIGSEGV
    r = run_command(kBin + " " + op + " --ranks 2 --depth 0 -e 4K");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(has_all(r.output, {"--depth", "not in range"})) << r.output;
  }
  // Reduce-scatter's two plans each hold the (N-2)/N of the message it passes on, and --ranks 3
  // starts all three ranks here: 3 x (2 + 2 x 1/3) x 0.15 = 1.2 of the memory is refused at
  // once, where the buffers alone (0.9) or one rank's share (0.4) would pass (the check once
  // counted one rank's, passed, and the allocations failed or were OOM-killed).
  const double ram = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  const auto of_ram = [&](double f) { return std::to_string(int64_t(f * ram / double(1 << 20))) + "M"; };
  std::string big = of_ram(0.15);
  r = run_command(kBin + " reducescatter --ranks 3 -b " + big + " -e " + big);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has_all(r.output, {"-e/--maxbytes " + big + " needs", "GiB of buffers per rank", "reducescatter's scratch",
                                 "for the 3 ranks on this machine"}))
      << r.output;
  // The one-shot direct allreduce keeps every rank's input in each of its two plans: 4 ranks of
  // (2 + 2 x 4) x 0.05 of the memory (the check once counted 4 x 2 x 0.05 = 0.4).
  big = of_ram(0.05);
  r = run_command(kBin + " allreduce --ranks 4 --algo direct -b " + big + " -e " + big);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has_all(r.output, {"-e/--maxbytes " + big + " needs", "allreduce's scratch", "for the 4 ranks"})) << r.output;
  r = run_command(kBin + " allreduce --ranks 2 --algo hx -e 4K");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has_all(r.output, {"unknown allreduce algorithm 'hx'", "rd or hd"})) << r.output;
}

}  // namespace
}  // namespace ringbench
