// End-to-end tests of `ringbench allreduce` launched locally (--ranks N) and by hand through the
// RINGBENCH_* environment: output, JSON, exit codes, and the errors users get for bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "collectives/net.h"
#include "tests/run_command.h"

#include <unistd.h>

namespace ringbench {
namespace {

using testing::run_command;
using testing::temp_path;
const std::string kBin = RINGBENCH_BIN;

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

TEST(Cli, LocalRanksWriteTableAndJson) {
  std::string json = temp_path("ar.json");
  auto r = run_command(kBin + " allreduce --ranks 3 -b 0 -e 64K -f 8 -n 3 -w 1 --timeout 10 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("# Out of bounds values : 0 OK"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("transport=tcp"), std::string::npos) << r.output;
  auto doc = read_json(json);
  EXPECT_EQ(doc["meta"]["ranks"], 3);
  EXPECT_EQ(doc["meta"]["launcher"], "local");
  ASSERT_EQ(doc["meta"]["hosts"].size(), 3u);
  for (auto& h : doc["meta"]["hosts"]) EXPECT_EQ(h["path"]["transport"], "tcp");
  // sizes 0, 4, 32, 256, 2048, 16384, 65536: out-of-place and in-place rows each
  ASSERT_EQ(doc["rows"].size(), 14u);
  for (auto& row : doc["rows"]) {
    for (const char* k : {"bytes", "count", "dtype", "op", "inplace", "time_us", "p50_us", "p99_us",
                          "algbw_gbps", "busbw_gbps", "wrong"})
      EXPECT_TRUE(row.contains(k)) << k;
    EXPECT_EQ(row["wrong"], 0);
    EXPECT_NEAR(row["busbw_gbps"].get<double>(), row["algbw_gbps"].get<double>() * 4.0 / 3.0, 1e-9);
  }
  EXPECT_EQ(doc["rows"].back()["bytes"], 65536);
}

TEST(Cli, HalfAverageWithTwoRanks) {
  auto r = run_command(kBin + " allreduce --ranks 2 -b 1K -e 1M -f 32 -n 2 -w 0 -d half -o avg --segment 4K");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("half"), std::string::npos);
}

TEST(Cli, SingleRankRuns) {
  auto r = run_command(kBin + " allreduce -b 1K -e 4K -n 2 -w 0 -d bfloat16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

TEST(Cli, BadOptionsAreClearErrors) {
  auto r = run_command(kBin + " allreduce -b 1M -e 1K");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("minbytes"), std::string::npos) << r.output;
  r = run_command(kBin + " allreduce -d int8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("use float, half or bfloat16"), std::string::npos) << r.output;
  r = run_command(kBin + " allreduce -e 12Q");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("unknown unit"), std::string::npos) << r.output;
  // Not built, no device, or no such device: each says so, naming --transport verbs.
  r = run_command(kBin + " allreduce --transport verbs --ib-dev no_such_dev0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--transport verbs"), std::string::npos) << r.output;
}

TEST(Cli, MpiImplNeedsMpirun) {
  auto r = run_command(kBin + " allreduce --impl mpi -e 4K");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("mpirun"), std::string::npos) << r.output;
}

// Without NCCL in the build or a GPU here, --impl nccl fails at once, before any rank starts,
// saying which; the metadata of any run says why there is no GPU. With both, it runs (the gpu
// tests cover it).
TEST(Cli, NcclImplWithoutNcclOrGpuIsAClearError) {
  auto r = run_command(kBin + " allreduce --impl nccl --ranks 2 -e 4K -n 1 -w 0");
  if (r.exit_code == 0) GTEST_SKIP() << "NCCL and a GPU are here: --impl nccl ran";
  EXPECT_NE(r.output.find("--impl nccl is not available: "), std::string::npos) << r.output;
  EXPECT_TRUE(r.output.find("built without NCCL") != std::string::npos ||
              r.output.find("no CUDA device") != std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[rank"), std::string::npos) << "no rank should have started: " << r.output;
  r = run_command(kBin + " allreduce --impl gloo");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("use ring, mpi or nccl"), std::string::npos) << r.output;
  const std::string json = temp_path("ar_gpu.json");
  r = run_command(kBin + " allreduce -b 4K -e 4K -n 1 -w 0 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("# gpu: "), std::string::npos) << r.output;
  const auto gpu = read_json(json)["meta"]["hosts"][0]["gpu"];
  if (!gpu["available"].get<bool>()) {
    EXPECT_FALSE(gpu["reason"].get<std::string>().empty()) << gpu;
  }
  std::remove(json.c_str());
}

// Two ranks started by hand with different sweeps: both must stop with a clear error.
TEST(Cli, RanksWithDifferentOptionsFail) {
  int port = 0;
  int fd = net::listen_tcp("127.0.0.1", 0, &port);
  ::close(fd);
  std::string env = "RINGBENCH_WORLD_SIZE=2 RINGBENCH_STORE=127.0.0.1:" + std::to_string(port) +
                    " RINGBENCH_JOB_ID=t ";
  std::string out0 = temp_path("rank0"), out1 = temp_path("rank1");
  std::string cmd = "(RINGBENCH_RANK=0 RINGBENCH_STORE_SERVE=1 " + env + kBin +
                    " allreduce -e 64K --timeout 5 >" + out0 + " 2>&1; echo $? >>" + out0 +
                    ") & (RINGBENCH_RANK=1 " + env + kBin + " allreduce -e 128K --timeout 5 >" +
                    out1 + " 2>&1; echo $? >>" + out1 + "); wait";
  auto r = run_command(cmd);
  for (auto& f : {out0, out1}) {
    std::ifstream in(f);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(text.find("differ from rank 0"), std::string::npos) << f << ":\n" << text;
    EXPECT_NE(text.substr(text.rfind('\n', text.size() - 2) + 1), "0\n") << text;
  }
}

}  // namespace
}  // namespace ringbench
