// --threads 0 (auto): the thread count from the CPUs a rank may use and how busy they are.
#include <gtest/gtest.h>
#include <sched.h>

#include "runner/cli/cpu_budget.h"

namespace ringbench {
namespace {

TEST(CpuBudget, FreeCpusSplitBetweenTheRanksHere) {
  EXPECT_EQ(decide_cpu_budget(2, 0, 0, 1).threads, 2);   // quiet: every CPU
  EXPECT_EQ(decide_cpu_budget(2, 0, 1, 1).threads, 1);   // a busy neighbour: its CPU is left
  EXPECT_EQ(decide_cpu_budget(2, 0, 2, 1).threads, 1);   // all busy: one thread, never zero
  EXPECT_EQ(decide_cpu_budget(16, 0, 4, 4).threads, 3);  // 12 free CPUs for 4 ranks
  EXPECT_EQ(decide_cpu_budget(16, 0, 0, 32).threads, 1);
}

// A second thread for weight gradients when busy CPUs took some of this rank's share, but not
// all CPUs are busy (then it only adds one more thread to share them).
TEST(CpuBudget, WeightGradientsBesideWhenSomeButNotAllCpusAreBusy) {
  EXPECT_FALSE(decide_cpu_budget(2, 0, 0, 1).weight_grad_thread);  // quiet
  EXPECT_TRUE(decide_cpu_budget(2, 0, 1, 1).weight_grad_thread);   // a busy neighbour
  EXPECT_FALSE(decide_cpu_budget(2, 0, 2, 1).weight_grad_thread);  // all busy
  EXPECT_FALSE(decide_cpu_budget(2, 0, 0, 2).weight_grad_thread);  // two ranks, one CPU each
  EXPECT_FALSE(decide_cpu_budget(2, 0, 1, 2).weight_grad_thread);  // their share is one CPU: still 1
  EXPECT_TRUE(decide_cpu_budget(16, 0, 4, 4).weight_grad_thread);  // 3 of a share of 4
  EXPECT_TRUE(decide_cpu_budget(16, 4.0, 1, 1).weight_grad_thread);
  // Only a recommendation: whether the thread ran is the network's to say (the # backend line).
  EXPECT_EQ(decide_cpu_budget(2, 0, 1, 1).describe().find("weight gradients"), std::string::npos);
  EXPECT_EQ(decide_cpu_budget(2, 0, 1, 1).to_json()["weight_grad_thread"], true);
}

TEST(CpuBudget, TheCgroupQuotaCaps) {
  EXPECT_EQ(decide_cpu_budget(16, 2.0, 0, 1).threads, 2);
  EXPECT_EQ(decide_cpu_budget(16, 1.5, 0, 1).threads, 2);  // a part of a CPU still runs a thread
  EXPECT_EQ(decide_cpu_budget(16, 0.5, 0, 1).threads, 1);
  EXPECT_EQ(decide_cpu_budget(16, 4.0, 1, 1).threads, 3);
}

TEST(CpuBudget, OutOfRangeInputsAreClamped) {
  const CpuBudget b = decide_cpu_budget(0, -1, 7, 0);
  EXPECT_EQ(b.allowed, 1);
  EXPECT_EQ(b.quota, 0);
  EXPECT_EQ(b.busy, 1);
  EXPECT_EQ(b.ranks_here, 1);
  EXPECT_EQ(b.threads, 1);
}

TEST(CpuBudget, MeasuredOnThisMachine) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const CpuBudget b = measure_cpu_budget(1, 50);
  EXPECT_EQ(b.allowed, CPU_COUNT(&set));
  EXPECT_GE(b.busy, 0);
  EXPECT_LE(b.busy, b.allowed);
  EXPECT_GE(b.threads, 1);
  EXPECT_LE(b.threads, b.allowed);
  EXPECT_NE(b.describe().find("auto: " + std::to_string(b.allowed) + " CPU"), std::string::npos) << b.describe();
  EXPECT_EQ(b.to_json()["threads"], b.threads);
  EXPECT_EQ(int(b.busy_cpus.size()), b.busy);
  EXPECT_LE(int(b.busy_cpus.size() + b.free_cpus.size()), b.allowed);  // (a CPU without ticks is neither)
}

}  // namespace
}  // namespace ringbench
