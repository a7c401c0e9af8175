// `ringbench allreduce` launched by mpirun (oversubscribed on this machine): our ring with MPI
// as bootstrap only, and the MPI_Allreduce baseline over Open MPI's tcp btl.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "ringbench/config.h"
#include "tests/run_command.h"

namespace ringbench {
namespace {

using testing::run_command;
using testing::run_json;

std::string mpirun(int np) {
  return "mpirun --allow-run-as-root --oversubscribe -np " + std::to_string(np) +
         " --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo ";
}

void skip_without_mpi() {
  if (!RINGBENCH_HAVE_MPI) GTEST_SKIP() << "built without MPI (RINGBENCH_WITH_MPI=OFF)";
  if (run_command("command -v mpirun").exit_code != 0) GTEST_SKIP() << "mpirun not installed";
}

TEST(Mpirun, RingOverTcpBootstrappedByMpi) {
  skip_without_mpi();
  auto [code, output, doc] = run_json(mpirun(4) + RINGBENCH_BIN + " allreduce -b 1K -e 1M -f 32 -n 3 -w 1");
  ASSERT_EQ(code, 0) << output;
  EXPECT_EQ(doc["meta"]["launcher"], "mpirun");
  EXPECT_EQ(doc["meta"]["impl"], "ring");
  EXPECT_EQ(doc["meta"]["ranks"], 4);
  for (auto& h : doc["meta"]["hosts"]) EXPECT_EQ(h["path"]["transport"], "tcp");
  for (auto& row : doc["rows"]) EXPECT_EQ(row["wrong"], 0);
}

TEST(Mpirun, MpiAllreduceBaseline) {
  skip_without_mpi();
  auto [code, output, doc] =
      run_json(mpirun(3) + RINGBENCH_BIN + " allreduce --impl mpi -b 1K -e 1M -f 32 -n 3 -w 1 -o avg");
  ASSERT_EQ(code, 0) << output;
  EXPECT_EQ(doc["meta"]["transport"], "mpi");
  EXPECT_EQ(doc["meta"]["hosts"][0]["path"]["btl"], "tcp,self");
  for (auto& row : doc["rows"]) EXPECT_EQ(row["wrong"], 0);
}

// Every other collective: MPI's own call (--impl mpi) and ours bootstrapped by mpirun, exact.
TEST(Mpirun, EveryCollectiveOverMpiAndOurs) {
  skip_without_mpi();
  for (const char* name : {"allgather", "reducescatter", "broadcast", "alltoall"})
    for (const char* impl : {"mpi", "ring"}) {
      SCOPED_TRACE(std::string(name) + " --impl " + impl);
      auto [code, output, doc] = run_json(mpirun(3) + RINGBENCH_BIN + " " + name + " --impl " + impl +
                                          " -b 1K -e 1M -f 32 -n 2 -w 1 -o avg");
      ASSERT_EQ(code, 0) << output;
      EXPECT_EQ(doc["meta"]["collective"], name);
      for (auto& row : doc["rows"]) EXPECT_EQ(row["wrong"], 0) << row;
    }
}

TEST(Mpirun, MpiBaselineRejectsHalf) {
  skip_without_mpi();
  auto r = run_command(mpirun(2) + RINGBENCH_BIN + " allreduce --impl mpi -d half -e 4K");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("supports --dtype float only"), std::string::npos) << r.output;
}

// Training under mpirun, gradients over our ring and over MPI_Allreduce: both report the path.
TEST(Mpirun, TrainOverRingAndMpi) {
  skip_without_mpi();
  for (const std::string transport : {"tcp", "mpi"}) {
    auto [code, output, doc] = run_json(mpirun(2) + RINGBENCH_BIN + " train --model lenet --batch 4 --steps 2 "
                                        "--warmup 1 --threads 1 --transport " + transport);
    ASSERT_EQ(code, 0) << output;
    EXPECT_EQ(doc["meta"]["launcher"], "mpirun");
    EXPECT_EQ(doc["meta"]["ranks"], 2);
    EXPECT_EQ(doc["meta"]["path"]["transport"], transport);
    EXPECT_EQ(doc["meta"]["allreduce"], transport == "mpi" ? "MPI_Allreduce" : "ring (ours) over tcp");
  }
}

}  // namespace
}  // namespace ringbench
