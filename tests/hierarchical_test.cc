// The hierarchical allreduce with threads standing for nodes x ranks: shared memory within a
// "node", loopback TCP across them. Exact (bit for bit) for 2 x 2, 3 x 2, 2 x 3, 4 x 1 and
// 1 x 3, counts from 0 up (uneven shares), sum and average, f32 and bf16, in place and out of
// place, at an offset, the levels one after the other and pipelined in chunks (uneven chunks,
// chunks smaller than the node's rank count); nothing written outside the range. Pipelined, a
// chunk crosses the nodes while the next is reduce-scattered within the node. And a rank
// SIGKILLed mid-run (2 x 2 forked ranks) is named, as the job's rank, by every other rank, with
// and without the pipeline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/errors.h"
#include "collectives/hierarchical_allreduce.h"
#include "collectives/transport/shm/shm_transport.h"
#include "collectives/verify.h"
#include "tests/process_ranks.h"
#include "tests/rank_threads.h"

namespace ringbench {
namespace {

using namespace std::chrono_literals;

struct Shape {
  int nodes, local;
};

// This rank's two levels, rendezvousing through `store`: shm among ranks node x L .. node x L + L-1,
// TCP among the ranks with its local rank.
struct Levels {
  std::unique_ptr<Transport> intra, inter;
};

// The test process's pid, taken before any fork: every rank's segments name the same job.
const std::string kJob = "hiertest-" + std::to_string(::getpid());

Levels connect_levels(Store& store, int rank, Shape s, std::chrono::milliseconds timeout, const std::string& secret = "") {
  const int node = rank / s.local, local = rank % s.local;
  ShmOptions so;
  so.job_id = kJob;
  so.key_prefix = "node" + std::to_string(node) + "/shm";
  so.ring_bytes = 16 << 10;
  so.timeout = timeout;
  TcpOptions to;
  to.key_prefix = "local" + std::to_string(local) + "/tcp";
  to.timeout = timeout;
  to.secret = secret;
  Levels l;
  l.intra = make_shm_transport(store, local, s.local, so);
  l.inter = make_tcp_transport(store, node, s.nodes, to);
  return l;
}

AllreduceOptions small_segments() {
  AllreduceOptions o;
  o.ring.segment_bytes = 64;  // a few elements: even tiny counts go through the pipeline
  o.ring.min_segment_bytes = 16;
  o.ring.depth = 2;
  o.ring.timeout = 10s;
  return o;
}

// Runs every count both ways on this rank and returns the wrong elements, counting as wrong any
// element outside [offset, offset + count) that changed.
uint64_t run_counts(HierarchicalAllreduce& out_of_place, HierarchicalAllreduce& in_place, std::vector<char>& in,
                    std::vector<char>& out, DType dtype, ReduceOp op, int rank, int n) {
  const size_t es = dtype_size(dtype), offset = 3;
  uint64_t wrong = 0;
  for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{7}, size_t{29}, size_t{1001}}) {
    for (bool inplace : {false, true}) {
      std::memset(out.data(), 0x5a, out.size());
      fill_input(dtype, (inplace ? out.data() : in.data()) + offset * es, count, rank, n);
      const char* algo = (inplace ? in_place : out_of_place).run(count, offset);
      EXPECT_STREQ(algo, "hier");
      wrong += count_wrong(dtype, out.data() + offset * es, count, n, op);
      for (size_t b = 0; b < offset * es; ++b) wrong += out[b] != 0x5a;
      for (size_t b = (offset + count) * es; b < out.size(); ++b) wrong += out[b] != 0x5a;
    }
  }
  return wrong;
}

class HierarchicalThreads : public ::testing::TestWithParam<Shape> {};

TEST_P(HierarchicalThreads, ExactForEveryCountOpAndDtype) {
  const Shape s = GetParam();
  const int n = s.nodes * s.local;
  InProcStore store;
  testing::run_threads(n, [&](int r) {
    Levels l = connect_levels(store, r, s, 10s);
    for (DType dtype : {DType::f32, DType::bf16})
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
        const size_t max_count = 1200, es = dtype_size(dtype);
        std::vector<char> in(max_count * es), out(max_count * es);
        // 0: the levels one after the other; 44 bytes: chunks of 11 or 22 elements (29 and 1001
        // leave a short last chunk; 3 and 7 are one chunk; with 2 bytes a chunk is smaller than
        // the node's shares).
        for (size_t chunk : {size_t{0}, size_t{44}, size_t{2}}) {
          HierarchicalAllreduce a(*l.intra, *l.inter, in.data(), out.data(), max_count, dtype, op, small_segments(),
                                  chunk);
          HierarchicalAllreduce b(*l.intra, *l.inter, out.data(), out.data(), max_count, dtype, op, small_segments(),
                                  chunk);
          EXPECT_EQ(run_counts(a, b, in, out, dtype, op, r, n), 0u)
              << "rank " << r << " of " << s.nodes << " x " << s.local << ", " << dtype_name(dtype) << " "
              << op_name(op) << ", chunk " << chunk << " bytes";
        }
      }
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, HierarchicalThreads,
                         ::testing::Values(Shape{2, 2}, Shape{3, 2}, Shape{2, 3}, Shape{4, 1}, Shape{1, 3}),
                         [](const ::testing::TestParamInfo<Shape>& p) {
                           return std::to_string(p.param.nodes) + "x" + std::to_string(p.param.local);
                         });

// Without the reduce-scatter within the node each node would carry the whole buffer; a plan
// asked for more than it was set up for is refused.
TEST(Hierarchical, RefusesARangePastItsBuffers) {
  InProcStore store;
  testing::run_threads(4, [&](int r) {
    Levels l = connect_levels(store, r, {2, 2}, 10s);
    std::vector<float> buf(16);
    HierarchicalAllreduce a(*l.intra, *l.inter, buf.data(), buf.data(), buf.size(), DType::f32, ReduceOp::sum);
    EXPECT_THROW(a.run(17), Error);
    EXPECT_THROW(a.run(10, 7), Error);
  });
}

// 2 nodes x 2 ranks as processes; rank 2 (node 1, local rank 0) is killed mid-run. Every other
// rank fails, naming rank 2 of the job, within a few timeouts.
void killed_rank_is_named(size_t chunk_bytes) {
  constexpr int kRanks = 4, kVictim = 2;
  constexpr auto kT = 2000ms;
  testing::ProcessRanks job;
  job.start(kRanks, [&](int rank, int port, const testing::Report& report) {
    TcpStore store("127.0.0.1", port, std::chrono::seconds(30), testing::kTestSecret);
    Levels l = connect_levels(store, rank, {2, 2}, kT, testing::kTestSecret);
    std::vector<float> buf(size_t{1} << 20);
    AllreduceOptions o;
    o.ring.timeout = 2 * kT;
    HierarchicalAllreduce a(*l.intra, *l.inter, buf.data(), buf.data(), buf.size(), DType::f32, ReduceOp::sum, o,
                            chunk_bytes);
    for (int it = 0;; ++it) {
      a.run(buf.size());
      if (it == 0) report("iter");
    }
    return 0;
  });
  auto all_ran = [&] {
    for (int r = 0; r < job.size(); ++r)
      if (!job.proc(r).find("iter") || job.proc(r).exited) return false;
    return true;
  };
  ASSERT_TRUE(job.pump_until(std::chrono::steady_clock::now() + 60s, all_ran)) << job.describe();
  ::kill(job.proc(kVictim).pid, SIGKILL);
  auto others_failed = [&] {
    for (int r = 0; r < kRanks; ++r)
      if (r != kVictim && !job.proc(r).find("fail")) return false;
    return true;
  };
  ASSERT_TRUE(job.pump_until(std::chrono::steady_clock::now() + 6 * kT, others_failed)) << job.describe();
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    const std::string line = job.proc(r).find("fail")->text;
    EXPECT_NE(line.find("allreduce (hier)"), std::string::npos) << "rank " << r << ": " << line;
    EXPECT_NE(line.find("rank 2 of the job"), std::string::npos) << "rank " << r << ": " << line;
  }
}

TEST(Hierarchical, AKilledRankIsNamedByEveryOther) { killed_rank_is_named(0); }
TEST(Hierarchical, AKilledRankIsNamedByEveryOtherWhilePipelined) { killed_rank_is_named(256 << 10); }

// Forwards everything to `t`; calls `on_send` with each send's offset before passing it on.
class WatchedTransport : public Transport {
 public:
  WatchedTransport(Transport& t, std::function<void(size_t offset)> on_send) : t_(t), on_send_(std::move(on_send)) {}
  int rank() const override { return t_.rank(); }
  int size() const override { return t_.size(); }
  const TransportCaps& caps() const override { return t_.caps(); }
  std::map<std::string, std::string> path_info() const override { return t_.path_info(); }
  std::unique_ptr<Buffer> register_buffer(void* data, size_t bytes, MemKind kind) override {
    return t_.register_buffer(data, bytes, kind);
  }
  std::unique_ptr<Request> isend(int peer, const Buffer& buf, size_t offset, size_t length, uint64_t tag) override {
    on_send_(offset);
    return t_.isend(peer, buf, offset, length, tag);
  }
  std::unique_ptr<Request> irecv(int peer, Buffer& buf, size_t offset, size_t length, uint64_t tag) override {
    return t_.irecv(peer, buf, offset, length, tag);
  }
  std::unique_ptr<Request> irecv_sink(int peer, size_t length, uint64_t tag, RecvSink sink) override {
    return t_.irecv_sink(peer, length, tag, std::move(sink));
  }
  Forward irecv_forward(int from, int to, size_t length, uint64_t tag, Buffer& home, size_t offset,
                        ForwardFn fn) override {
    return t_.irecv_forward(from, to, length, tag, home, offset, std::move(fn));
  }
  void abort(const std::string& reason) noexcept override { t_.abort(reason); }

 private:
  Transport& t_;
  std::function<void(size_t)> on_send_;
};

// The pipeline overlaps the levels: the first send across the nodes (chunk 0) holds until this
// rank's level within the node has started on chunk 1. Were the chunks taken one after the other
// through all three phases, chunk 1 would wait for chunk 0 to cross, and the hold would time out.
TEST(Hierarchical, AChunkCrossesTheNodesWhileTheNextIsReduceScattered) {
  constexpr size_t kCount = 4096, kChunk = 1024;  // f32: 4 chunks of 4 KiB
  InProcStore store;
  testing::run_threads(4, [&](int r) {
    Levels l = connect_levels(store, r, {2, 2}, 10s);
    std::mutex mu;
    std::condition_variable cv;
    bool next_chunk_started = false, held = false, overlapped = false;
    WatchedTransport intra(*l.intra, [&](size_t offset) {
      if (offset < kChunk * sizeof(float)) return;
      std::lock_guard<std::mutex> lk(mu);
      next_chunk_started = true;
      cv.notify_all();
    });
    WatchedTransport inter(*l.inter, [&](size_t) {
      std::unique_lock<std::mutex> lk(mu);
      if (held) return;
      held = true;
      overlapped = cv.wait_for(lk, 5s, [&] { return next_chunk_started; });
    });
    std::vector<float> in(kCount), out(kCount);
    AllreduceOptions o;
    o.ring.timeout = 20s;
    HierarchicalAllreduce a(intra, inter, in.data(), out.data(), kCount, DType::f32, ReduceOp::sum, o,
                            kChunk * sizeof(float));
    fill_input(DType::f32, reinterpret_cast<char*>(in.data()), kCount, r, 4);
    a.run(kCount);
    EXPECT_EQ(count_wrong(DType::f32, reinterpret_cast<char*>(out.data()), kCount, 4, ReduceOp::sum), 0u);
    EXPECT_TRUE(overlapped) << "rank " << r << ": chunk 0's first send across the nodes waited 5 s and the level "
                            << "within the node never started chunk 1";
  });
}

}  // namespace
}  // namespace ringbench
