// A rank SIGKILLed in the middle of an allgather, a reduce-scatter, a broadcast or an alltoall
// (4 forked ranks over TCP): every other rank fails within 2 x the transport timeout with an
// error that names the operation and the dead rank, as fault_test requires of the allreduce.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/chain_broadcast.h"
#include "collectives/direct_alltoall.h"
#include "collectives/ring_allgather.h"
#include "collectives/ring_reducescatter.h"
#include "tests/process_ranks.h"

namespace ringbench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::ProcessRanks;
using testing::Report;
using testing::run_rank;

constexpr int kRanks = 4, kVictim = 2;
constexpr std::chrono::milliseconds kT{2000};
constexpr size_t kBlock = size_t{1} << 18;  // 1 MiB of floats per rank

// Runs `op(t, in, out, options)` (which returns the collective's run) in a loop on every rank,
// kills rank 2 once all have run it once, and checks what the others say.
using MakeRun = std::function<std::function<void()>(Transport&, const float*, float*, RingOptions)>;

void victim_mid(const MakeRun& make, const std::string& op_name) {
  ProcessRanks job;
  job.start(kRanks, [&](int rank, int port, const Report& report) {
    TcpOptions to;
    to.timeout = kT;
    return run_rank(rank, kRanks, port, report, to, [&](Transport& t) {
      std::vector<float> in(kBlock * kRanks, 1.0f), out(kBlock * kRanks);
      RingOptions ro;
      ro.timeout = 2 * kT;
      auto run = make(t, in.data(), out.data(), ro);
      for (int it = 0;; ++it) {
        run();
        if (it == 0) report("iter");
      }
    });
  });
  auto all_ran = [&] {
    for (int r = 0; r < job.size(); ++r)
      if (!job.proc(r).find("iter") || job.proc(r).exited) return false;
    return true;
  };
  ASSERT_TRUE(job.pump_until(Clock::now() + 30s, all_ran)) << job.describe();
  job.pump_for(200ms);
  const auto hit_at = Clock::now();
  ASSERT_TRUE(job.others_exit_after_signal(kVictim, SIGKILL, hit_at + 2 * kT + kT + 3s)) << job.describe();
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto* fail = job.proc(r).find("fail ");
    ASSERT_NE(fail, nullptr) << job.describe();
    EXPECT_NE(fail->text.find("rank 2 (127.0.0.1:"), std::string::npos) << fail->text;
    EXPECT_NE(fail->text.find(op_name), std::string::npos) << fail->text;
    EXPECT_LE(fail->at - hit_at, 2 * kT) << fail->text;
  }
}

TEST(CollectiveFault, KilledRankIsNamedInAnAllgather) {
  victim_mid([](Transport& t, const float* in, float* out, RingOptions o) -> std::function<void()> {
    auto c = std::make_shared<RingAllgather>(t, in, out, kBlock, DType::f32, o);
    return [c] { c->run(kBlock); };
  }, "allgather (ring)");
}

TEST(CollectiveFault, KilledRankIsNamedInAReduceScatter) {
  victim_mid([](Transport& t, const float* in, float* out, RingOptions o) -> std::function<void()> {
    auto c = std::make_shared<RingReduceScatter>(t, in, out, kBlock, DType::f32, ReduceOp::sum, o);
    return [c] { c->run(kBlock); };
  }, "reduce-scatter (ring)");
}

TEST(CollectiveFault, KilledRankIsNamedInABroadcast) {
  victim_mid([](Transport& t, const float* in, float* out, RingOptions o) -> std::function<void()> {
    auto c = std::make_shared<ChainBroadcast>(t, in, out, kBlock * kRanks, DType::f32, o);
    return [c] { c->run(kBlock * kRanks); };
  }, "broadcast (chain");
}

TEST(CollectiveFault, KilledRankIsNamedInAnAlltoall) {
  victim_mid([](Transport& t, const float* in, float* out, RingOptions o) -> std::function<void()> {
    auto c = std::make_shared<DirectAlltoall>(t, in, out, kBlock, DType::f32, o);
    return [c] { c->run(kBlock); };
  }, "alltoall (direct)");
}

}  // namespace
}  // namespace ringbench
