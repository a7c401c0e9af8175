// Ranks from Slurm's environment (runner/job/slurm.h): the variables an srun task gets, turned
// into the env launcher's. The real srun is tests/slurm/slurm-in-ci.sh's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "base/errors.h"
#include "runner/job/slurm.h"

namespace ringbench {
namespace {

using Env = std::map<std::string, std::string>;

Env task(int rank, int tasks, const std::string& nodes, const std::string& nodelist) {
  return {{"SLURM_PROCID", std::to_string(rank)}, {"SLURM_STEP_NUM_TASKS", std::to_string(tasks)},
          {"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "3"}, {"SLURM_STEP_NUM_NODES", nodes},
          {"SLURM_STEP_NODELIST", nodelist}};
}

TEST(Slurm, FirstHostOfAHostlist) {
  EXPECT_EQ(slurm_first_host("node7"), "node7");
  EXPECT_EQ(slurm_first_host("a,b"), "a");
  EXPECT_EQ(slurm_first_host("node[03-05,9]"), "node03");
  EXPECT_EQ(slurm_first_host("gpu[12,14],cpu1"), "gpu12");
  EXPECT_EQ(slurm_first_host("login1,node[1-4]"), "login1");
  EXPECT_THROW(slurm_first_host("node[1"), Error);
}

TEST(Slurm, EveryTaskOfAStepComputesTheSameStoreAndRank0ServesIt) {
  const Env r0 = slurm_rank_env(task(0, 4, "2", "node[1-2]")), r3 = slurm_rank_env(task(3, 4, "2", "node[1-2]"));
  EXPECT_EQ(r0.at("RINGBENCH_RANK"), "0");
  EXPECT_EQ(r3.at("RINGBENCH_RANK"), "3");
  EXPECT_EQ(r3.at("RINGBENCH_WORLD_SIZE"), "4");
  EXPECT_EQ(r0.at("RINGBENCH_STORE"), r3.at("RINGBENCH_STORE"));
  EXPECT_EQ(r0.at("RINGBENCH_STORE"), "node1:" + std::to_string(slurm_store_port(4242, 3)));
  EXPECT_EQ(r0.at("RINGBENCH_JOB_ID"), "slurm-4242.3");
  EXPECT_EQ(r0.at("RINGBENCH_LAUNCHER"), "slurm");
  EXPECT_EQ(r0.count("RINGBENCH_STORE_SERVE"), 1u);
  EXPECT_EQ(r3.count("RINGBENCH_STORE_SERVE"), 0u);
  // One node: loopback, where ranks may run without a secret.
  EXPECT_EQ(slurm_rank_env(task(1, 2, "1", "node1")).at("RINGBENCH_STORE").rfind("127.0.0.1:", 0), 0u);
  // Another step of the job gets another port.
  EXPECT_NE(slurm_store_port(4242, 3), slurm_store_port(4242, 4));
}

TEST(Slurm, WhatIsSetByHandIsKept) {
  Env e = task(0, 2, "2", "node[1-2]");
  e["RINGBENCH_STORE"] = "10.0.0.9:7777";
  EXPECT_EQ(slurm_rank_env(e).count("RINGBENCH_STORE"), 0u);
}

TEST(Slurm, MalformedVariablesAreErrorsNamingThem) {
  Env e = task(0, 2, "1", "n1");
  e["SLURM_PROCID"] = "x1";
  try {
    slurm_rank_env(e);
    FAIL();
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("SLURM_PROCID='x1' is not a number"), std::string::npos) << err.what();
  }
  EXPECT_THROW(slurm_rank_env(task(2, 2, "1", "n1")), Error);  // rank not below the size
}

TEST(Slurm, TasksOnThisNode) {
  setenv("SLURM_STEP_TASKS_PER_NODE", "2(x3),1", 1);
  setenv("SLURM_NODEID", "2", 1);
  EXPECT_EQ(slurm_tasks_on_this_node(), 2);
  setenv("SLURM_NODEID", "3", 1);
  EXPECT_EQ(slurm_tasks_on_this_node(), 1);
  setenv("SLURM_STEP_TASKS_PER_NODE", "4", 1);
  setenv("SLURM_NODEID", "0", 1);
  EXPECT_EQ(slurm_tasks_on_this_node(), 4);
  unsetenv("SLURM_STEP_TASKS_PER_NODE");
  EXPECT_EQ(slurm_tasks_on_this_node(), 1);
}

}  // namespace
}  // namespace ringbench
