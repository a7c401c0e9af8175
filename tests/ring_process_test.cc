// Ring allreduce with forked processes as ranks (as in a real run, minus the network): each
// child connects through a TcpStore to the parent's TcpStoreServer, builds its own TCP
// transport and checks every result exactly. Children report over a pipe and by exit status
// (the harness is in tests/process_ranks.h).
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/dtype.h"
#include "base/errors.h"
#include "collectives/ring_allreduce.h"
#include "collectives/transport/tcp/tcp_transport.h"
#include "collectives/verify.h"
#include "tests/process_ranks.h"

namespace ringbench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using testing::ProcessRanks;
using testing::Report;
using testing::run_rank;

// ---- tests --------------------------------------------------------------------------------

class RingProcesses : public ::testing::TestWithParam<int> {};

TEST_P(RingProcesses, ExactResults) {
  const int n = GetParam();
  ProcessRanks job;
  job.start(n, [n](int rank, int port, const Report& report) {
    TcpOptions opts;
    opts.timeout = 30s;
    return run_rank(rank, n, port, report, opts, [&](Transport& t) {
      for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
        const size_t es = dtype_size(dtype);
        for (size_t count : {size_t{0}, size_t{7}, (size_t{1} << 20) + 3}) {
          const std::vector<size_t> segs =
              count <= 7 ? std::vector<size_t>{es, size_t{1} << 20}
                         : std::vector<size_t>{size_t{64} << 10, size_t{1} << 20};
          for (size_t seg : segs)
            for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg})
              for (bool inplace : {false, true}) {
                std::vector<char> in(count * es + 1, 0x5a), out(count * es + 1, 0x5a);
                fill_input(dtype, in.data(), count, rank, n);
                RingOptions ro;
                ro.segment_bytes = seg;
                ro.timeout = 30s;
                char* res = inplace ? in.data() : out.data();
                RingAllreduce ring(t, in.data(), res, count, dtype, op, ro);
                ring.run(count);
                const size_t wrong = count_wrong(dtype, res, count, n, op);
                const std::string what = std::string(dtype_name(dtype)) + " count " +
                                         std::to_string(count) + " seg " + std::to_string(seg) +
                                         " " + op_name(op) +
                                         (inplace ? " in-place" : " out-of-place");
                if (wrong != 0)
                  throw std::runtime_error(what + ": " + std::to_string(wrong) +
                                           " wrong elements");
                if (in[count * es] != 0x5a || out[count * es] != 0x5a)
                  throw std::runtime_error(what + ": wrote past the end");
              }
        }
      }
    });
  });
  const bool done = job.pump_until(Clock::now() + 300s, [&] { return job.all_exited(); });
  ASSERT_TRUE(done) << "ranks still running after 300 s:" << job.describe();
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(job.proc(r).exited_ok()) << "rank " << r << " failed:" << job.describe();
    EXPECT_NE(job.proc(r).find("ok"), nullptr) << "rank " << r << job.describe();
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingProcesses, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return std::to_string(p.param) + "ranks";
                         });

// The harness itself: a child that fails reports it, and exit statuses come through.
TEST(RingProcessesHarness, ReportsFailureAndStatus) {
  ProcessRanks job;
  job.start(2, [](int rank, int, const Report& report) {
    if (rank == 1) throw Error("boom from rank 1");
    report("hello");
    return 0;
  });
  ASSERT_TRUE(job.pump_until(Clock::now() + 30s, [&] { return job.all_exited(); }))
      << job.describe();
  EXPECT_TRUE(job.proc(0).exited_ok());
  ASSERT_NE(job.proc(0).find("hello"), nullptr);
  EXPECT_FALSE(job.proc(1).exited_ok());
  ASSERT_NE(job.proc(1).find("fail Error: boom from rank 1"), nullptr) << job.describe();
}

}  // namespace
}  // namespace ringbench
