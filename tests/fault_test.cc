// Fault tolerance of the TCP transport and the ring, with forked processes as ranks:
//   - a rank SIGKILLed or SIGSTOPped in the middle of an allreduce: every other rank fails,
//     names the culprit ("rank 2"), and does so within 2 x the transport timeout;
//   - ranks that disagree on the count, the dtype or the op: every rank fails (none hangs,
//     none succeeds) with an error saying that the ranks disagree;
//   - a stray TCP client or a rank of another job connecting during setup is rejected and the
//     job goes on (threads as ranks here);
//   - once a transfer has failed, the transport no longer receives into or sends from the
//     caller's buffer (which the caller may free or reuse at once).
//
// The 2 x T bound is measured in the parent, from the signal to the moment the child's
// failure report arrives on its pipe (each child reports before tearing its transport down),
// and to the moment the child has exited.
//
// The forked ranks come from tests/process_ranks.h.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "collectives/net.h"
#include "collectives/ring_allreduce.h"
#include "collectives/store.h"
#include "collectives/transport/tcp/tcp_transport.h"
#include "collectives/verify.h"
#include "tests/process_ranks.h"

namespace ringbench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

using testing::ProcessRanks;
using testing::Report;
using testing::run_rank;

// ---- parameters ---------------------------------------------------------------------------

constexpr int kRanks = 4;
constexpr milliseconds kT{2000};         // TcpOptions.timeout
constexpr milliseconds kBound = 2 * kT;  // the contract: every survivor fails within 2 x T
// After a failure, a rank's transport destructor still flushes its own frames for a bounded
// time (min(T, 1 s) at the time of writing); T is a generous bound for that.
constexpr milliseconds kLinger = kT;
constexpr milliseconds kSlack{3000};  // scheduling noise, for exit deadlines only

TcpOptions fault_tcp_options() {
  TcpOptions o;
  o.timeout = kT;
  return o;
}

RingOptions fault_ring_options() {
  RingOptions o;
  o.timeout = 2 * kT;
  return o;
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

bool contains(const std::string& s, std::string_view what) {
  return s.find(what) != std::string::npos;
}

// ---- a rank dies or stops in the middle of an allreduce ----------------------------------

// Every rank runs allreduces of 4 MiB in a loop; once all have finished one, the parent waits
// ~300 ms and sends `sig` to rank 2. Every other rank must fail naming rank 2 within 2 x T, and
// be gone (transport torn down, process exited) within 2 x T too.
void victim_mid_allreduce(int sig) {
  constexpr int kVictim = 2;
  constexpr size_t kCount = size_t{1} << 20;
  ProcessRanks job;
  job.start(kRanks, [](int rank, int port, const Report& report) {
    return run_rank(rank, kRanks, port, report, fault_tcp_options(), [&](Transport& t) {
      std::vector<float> in(kCount), out(kCount);
      fill_input(DType::f32, in.data(), kCount, rank, kRanks);
      RingAllreduce ring(t, in.data(), out.data(), kCount, DType::f32, ReduceOp::sum,
                         fault_ring_options());
      for (int it = 0;; ++it) {
        ring.run(kCount);
        if (it == 0) {
          if (count_wrong(DType::f32, out.data(), kCount, kRanks, ReduceOp::sum) != 0)
            throw std::runtime_error("wrong result before any fault");
          report("iter");
        }
      }
    });
  });
  auto all_have = [&](std::string_view what) {
    return [&job, what] {
      for (int r = 0; r < job.size(); ++r)
        if (!job.proc(r).find(what) || job.proc(r).exited) return false;
      return true;
    };
  };
  ASSERT_TRUE(job.pump_until(Clock::now() + 30s, all_have("iter")))
      << "the ranks did not get going:" << job.describe();
  job.pump_for(300ms);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_FALSE(job.proc(r).exited) << "rank " << r << " stopped early:" << job.describe();

  const auto hit_at = Clock::now();
  const bool exited = job.others_exit_after_signal(kVictim, sig, hit_at + kBound + kLinger + kSlack);
  ASSERT_TRUE(exited) << "survivors still running " << ms(Clock::now() - hit_at)
                      << " ms after the signal:" << job.describe();

  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto& p = job.proc(r);
    EXPECT_TRUE(p.exited && WIFEXITED(p.status) && WEXITSTATUS(p.status) == 1)
        << job.describe();
    const auto* fail = p.find("fail ");
    ASSERT_NE(fail, nullptr) << "no failure reported:" << job.describe();
    EXPECT_TRUE(contains(fail->text, "fail IoError") || contains(fail->text, "fail TimeoutError"))
        << fail->text;
    EXPECT_TRUE(contains(fail->text, "rank 2 (127.0.0.1:"))
        << "the error does not name the victim: " << fail->text;
    EXPECT_NE(p.find("closed"), nullptr) << "the transport teardown did not finish (crash?):"
                                         << job.describe();
    EXPECT_GE(fail->at, hit_at) << "failed before the fault: " << fail->text;
    EXPECT_LE(fail->at - hit_at, kBound)
        << "failed " << ms(fail->at - hit_at) << " ms after the signal (bound "
        << kBound.count() << " ms): " << fail->text;
    // Exiting may add the transport teardown's bounded flush to a stopped peer (kLinger).
    EXPECT_LE(p.exit_at - hit_at, kBound + kLinger)
        << "exited " << ms(p.exit_at - hit_at) << " ms after the signal (bound "
        << (kBound + kLinger).count() << " ms)";
    const auto* closed = p.find("closed");
    std::cerr << "[ info ] rank " << r << " failed " << ms(fail->at - hit_at)
              << " ms, closed its transport "
              << (closed ? std::to_string(ms(closed->at - hit_at)) : std::string("never"))
              << " ms and exited " << ms(p.exit_at - hit_at) << " ms after the signal: "
              << fail->text << "\n";
  }
  const auto& v = job.proc(kVictim);
  EXPECT_TRUE(v.exited && WIFSIGNALED(v.status) && WTERMSIG(v.status) == SIGKILL)
      << job.describe();
}

TEST(FaultKill, SigkilledRankIsNamedByAllWithin2T) { victim_mid_allreduce(SIGKILL); }

TEST(FaultStop, SigstoppedRankIsNamedByAllWithin2T) { victim_mid_allreduce(SIGSTOP); }

// ---- ranks that disagree on the operation -------------------------------------------------

struct Call {
  size_t count;
  DType dtype;
  ReduceOp op;
};

// Every rank runs one allreduce with `call(rank)`; all must fail with an IoError that says
// the ranks disagree, and exit, within 2 x T of the last rank starting.
void expect_disagreement(const std::function<Call(int rank)>& call) {
  ProcessRanks job;
  job.start(kRanks, [&call](int rank, int port, const Report& report) {
    return run_rank(rank, kRanks, port, report, fault_tcp_options(), [&](Transport& t) {
      const Call c = call(rank);
      const size_t es = dtype_size(c.dtype);
      std::vector<char> in(c.count * es), out(c.count * es);
      fill_input(c.dtype, in.data(), c.count, rank, kRanks);
      RingAllreduce ring(t, in.data(), out.data(), c.count, c.dtype, c.op, fault_ring_options());
      report("start");
      ring.run(c.count);
    });
  });
  const bool exited = job.pump_until(Clock::now() + 10s + kBound + kLinger + kSlack,
                                     [&] { return job.all_exited(); });
  ASSERT_TRUE(exited) << "ranks still running (hung?):" << job.describe();
  Clock::time_point last_start{};
  for (int r = 0; r < kRanks; ++r) {
    const auto* s = job.proc(r).find("start");
    ASSERT_NE(s, nullptr) << "rank " << r << " never started:" << job.describe();
    last_start = std::max(last_start, s->at);
  }
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const auto& p = job.proc(r);
    EXPECT_EQ(p.find("ok"), nullptr) << "succeeded:" << job.describe();
    EXPECT_TRUE(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 1) << job.describe();
    const auto* fail = p.find("fail ");
    ASSERT_NE(fail, nullptr) << "no failure reported:" << job.describe();
    // An IoError, not a TimeoutError: the disagreement is detected, not waited out.
    EXPECT_TRUE(contains(fail->text, "fail IoError: ")) << fail->text;
    EXPECT_TRUE(contains(fail->text, "disagree")) << fail->text;
    EXPECT_NE(p.find("closed"), nullptr) << "the transport teardown did not finish (crash?):"
                                         << job.describe();
    EXPECT_LE(fail->at - last_start, kBound)
        << "failed " << ms(fail->at - last_start) << " ms after the last rank started";
    EXPECT_LE(p.exit_at - last_start, kBound)
        << "exited " << ms(p.exit_at - last_start) << " ms after the last rank started";
    std::cerr << "[ info ] rank " << r << " failed " << ms(fail->at - last_start)
              << " ms and exited " << ms(p.exit_at - last_start)
              << " ms after the last rank started: " << fail->text << "\n";
  }
}

constexpr size_t kMismatchCount = 100003;

TEST(FaultMismatch, CountDiffersOnOneRank) {
  expect_disagreement([](int rank) {
    return Call{rank == 1 ? kMismatchCount + 1 : kMismatchCount, DType::f32, ReduceOp::sum};
  });
}

TEST(FaultMismatch, CountZeroOnOneRank) {
  expect_disagreement([](int rank) {
    return Call{rank == 3 ? 0 : kMismatchCount, DType::f32, ReduceOp::sum};
  });
}

TEST(FaultMismatch, DtypeDiffersOnOneRank) {
  expect_disagreement([](int rank) {
    return Call{kMismatchCount, rank == 1 ? DType::f16 : DType::f32, ReduceOp::sum};
  });
}

TEST(FaultMismatch, DtypeBf16VsF16SameSize) {
  // Same element size, so only the tag tells the two apart.
  expect_disagreement([](int rank) {
    return Call{kMismatchCount, rank == 2 ? DType::bf16 : DType::f16, ReduceOp::sum};
  });
}

TEST(FaultMismatch, OpDiffersOnOneRank) {
  expect_disagreement([](int rank) {
    return Call{kMismatchCount, DType::f32, rank == 0 ? ReduceOp::avg : ReduceOp::sum};
  });
}

// ---- strangers during setup (threads as ranks) ---------------------------------------------

// Runs rank `rank` of `n` on a thread: connects, allreduces 1000 floats, checks them.
std::jthread rank_thread(Store& store, int rank, int n, const TcpOptions& opts,
                         std::string& error) {
  return std::jthread([&store, rank, n, opts, &error] {
    try {
      auto t = make_tcp_transport(store, rank, n, opts);
      constexpr size_t kCount = 1000;
      std::vector<float> in(kCount), out(kCount);
      fill_input(DType::f32, in.data(), kCount, rank, n);
      RingAllreduce ring(*t, in.data(), out.data(), kCount, DType::f32, ReduceOp::sum);
      ring.run(kCount);
      if (size_t wrong = count_wrong(DType::f32, out.data(), kCount, n, ReduceOp::sum))
        error = std::to_string(wrong) + " wrong elements";
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
}

// The address rank `rank` advertises in the store: where a stranger would knock.
std::pair<std::string, int> advertised(Store& store, int rank, const TcpOptions& opts) {
  return parse_host_port(store.get(opts.key_prefix + "/addr/" + std::to_string(rank), 10s));
}

// A view of a store whose get() of one key waits until open(): holds ranks back at a known
// point of their setup. (A rank starts accepting only once it has read every peer's address,
// and a peer connects as soon as it has read the address of the rank it connects to.)
class GatedStore : public Store {
 public:
  GatedStore(Store& inner, std::string key) : inner_(inner), key_(std::move(key)) {}
  void set(const std::string& key, const Bytes& value) override { inner_.set(key, value); }
  Bytes get(const std::string& key, Millis timeout) override {
    if (key == key_) {
      std::unique_lock lk(mu_);
      cv_.wait_for(lk, timeout, [&] { return open_; });
    }
    return inner_.get(key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override { return inner_.add(key, delta); }
  std::string describe() const override { return inner_.describe(); }
  void open() {
    {
      std::lock_guard lk(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  Store& inner_;
  std::string key_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Opens the gate when a test returns early, so that no rank waits out its timeout.
struct OpenOnExit {
  GatedStore& gate;
  ~OpenOnExit() { gate.open(); }
};

TEST(FaultStray, GarbageClientsDuringSetupAreRejected) {
  constexpr int kN = 3;
  InProcStore store;
  TcpOptions opts;
  opts.timeout = 10s;
  GatedStore gated(store, opts.key_prefix + "/addr/0");  // ranks 1, 2 wait before connecting
  std::vector<std::string> errors(kN);
  std::vector<std::jthread> ranks;
  OpenOnExit guard{gated};
  ranks.push_back(rank_thread(store, 0, kN, opts, errors[0]));
  for (int r = 1; r < kN; ++r) ranks.push_back(rank_thread(gated, r, kN, opts, errors[r]));
  const auto [host, port] = advertised(store, 0, opts);

  // A client that sends more than a handshake's worth of garbage and waits: rank 0, which is
  // waiting for its peers, must reject it (close the connection) at once.
  int stray = net::connect_tcp(host, port, Clock::now() + 5s);
  std::string garbage = "GET / HTTP/1.1\r\nHost: ringbench\r\n\r\n";
  garbage.resize(512, 'x');
  const auto sent_at = Clock::now();
  ASSERT_TRUE(net::write_all(stray, garbage.data(), garbage.size(), Clock::now() + 5s));
  // Rank 0 challenges every connection (40 bytes), then closes this one unanswered.
  char challenge[40];
  ASSERT_TRUE(net::read_all(stray, challenge, sizeof challenge, Clock::now() + 5s));
  char byte = 0;
  EXPECT_THROW(net::read_all(stray, &byte, 1, Clock::now() + 5s), Error)
      << "rank 0 neither closed nor answered the stray connection";
  EXPECT_LT(Clock::now() - sent_at, 2s) << "the rejection took too long";
  ::close(stray);

  // A client that sends a few bytes of something like a handshake and hangs up.
  int quitter = net::connect_tcp(host, port, Clock::now() + 5s);
  ASSERT_TRUE(net::write_all(quitter, "RINGB", 5, Clock::now() + 5s));
  ::close(quitter);

  // The real peers connect after the strangers (accept order is FIFO) and the job completes.
  gated.open();
  ranks.clear();  // joins
  for (int r = 0; r < kN; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// A 2-rank job (options `opts`) whose real rank 1 is held back while `intruder`, a second rank
// 1 with other options, tries to join rank 0 (through a store of its own, so that it does not
// overwrite the real rank 1's address). Returns the intruder's IoError and sets *peer and *took;
// the real rank 1 must still join and the job complete.
std::string intruder_error(const TcpOptions& opts, const TcpOptions& intruder, int* peer, Clock::duration* took) {
  constexpr int kN = 2;
  InProcStore store;
  GatedStore gated(store, opts.key_prefix + "/addr/0");
  std::vector<std::string> errors(kN);
  std::vector<std::jthread> ranks;
  OpenOnExit guard{gated};
  ranks.push_back(rank_thread(store, 0, kN, opts, errors[0]));
  ranks.push_back(rank_thread(gated, 1, kN, opts, errors[1]));  // held back until open()
  const auto [host, port] = advertised(store, 0, opts);
  InProcStore other;
  other.set(opts.key_prefix + "/addr/0", host + ":" + std::to_string(port));
  std::string what = "(joined)";
  const auto t0 = Clock::now();
  try {
    auto t = make_tcp_transport(other, 1, kN, intruder);
    ADD_FAILURE() << "the intruder joined";
  } catch (const IoError& e) {
    what = e.what();
    *peer = e.peer();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an IoError: " << e.what();
  }
  *took = Clock::now() - t0;
  gated.open();
  ranks.clear();  // joins
  for (int r = 0; r < kN; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return what;
}

// The options of a 2-rank job of `job` with `secret`, as the stray tests vary them.
TcpOptions stray_options(const std::string& job, const std::string& secret) {
  TcpOptions opts;
  opts.timeout = 10s;
  opts.job_id = job;
  opts.secret = secret;
  return opts;
}

TEST(FaultStray, RankOfAnotherJobGetsAJobIdError) {
  int peer = -1;
  Clock::duration took{};
  const std::string what = intruder_error(stray_options("job-a", ""), stray_options("job-b", ""), &peer, &took);
  EXPECT_TRUE(contains(what, "job id")) << what;
  EXPECT_TRUE(contains(what, "job-b") && contains(what, "job-a")) << what;
  EXPECT_TRUE(contains(what, "rank 0 (")) << what;
  EXPECT_EQ(peer, 0) << what;
  EXPECT_LT(took, 2s) << "the rejection took too long";
}

// A rank without the job's secret (same job id, guessed) is closed unanswered: it learns nothing
// but that it was refused, and the job goes on with its real rank.
TEST(FaultStray, RankWithoutTheSecretIsClosedUnanswered) {
  int peer = -1;
  Clock::duration took{};
  const std::string what = intruder_error(stray_options("ringbench", "the job's secret, thirty-two b.."),
                                          stray_options("ringbench", "a guess at the secret, 32 bytes."),
                                          &peer, &took);
  EXPECT_TRUE(contains(what, "does not share the job's secret")) << what;
  EXPECT_FALSE(contains(what, "job id")) << "an unauthenticated rank got an answer: " << what;
  EXPECT_EQ(peer, 0) << what;
  EXPECT_LT(took, 5s) << "the rejection took too long";
}

// ---- after a failure the caller's buffers are the caller's again -------------------------

// A request that failed is finished for its caller, who may free or reuse the buffer at once
// (the ring does: its slots and the user's buffers go when run() throws). So once the transport
// has failed, its I/O thread must neither keep receiving into nor keep sending from them.
constexpr size_t kHuge = size_t{32} << 20;

// One socket, and small fixed socket buffers (no autotuning): a sender gets no further than a
// few hundred KiB ahead of its receiver.
TcpOptions one_socket_options(int socket_buffer_bytes) {
  TcpOptions o;
  o.timeout = 10s;
  o.sockets_per_peer = 1;
  o.socket_buffer_bytes = socket_buffer_bytes;
  return o;
}

// Rank 0 (a child process) is stopped in the middle of sending a message to rank 1 (this
// process). Rank 1's receive fails when rank 0 falls silent, and rank 1 reuses its buffer. When
// rank 0 resumes, the rest of its message must not land in that buffer.
TEST(FaultBuffers, NoReceiveIntoBufferAfterFailure) {
  TcpOptions opts = one_socket_options(64 << 10);
  opts.timeout = 1s;
  ProcessRanks job;
  job.start(1, [&opts](int, int port, const Report& report) {
    std::vector<char> buf(kHuge, 'a');
    TcpStore store("127.0.0.1", port, 30s, testing::kTestSecret);
    auto t = make_tcp_transport(store, 0, 2, opts);
    auto b = t->register_buffer(buf.data(), buf.size());
    auto s = t->isend(1, *b, 0, buf.size(), 42);
    report("posted");
    s->wait(30s);
    report("sent");
    return 0;
  });
  std::vector<char> buf(kHuge, 0);
  TcpStore store("127.0.0.1", job.store_port(), 30s, testing::kTestSecret);
  auto t = make_tcp_transport(store, 1, 2, opts);
  ASSERT_TRUE(job.pump_until(Clock::now() + 30s, [&] { return job.proc(0).find("posted"); }))
      << job.describe();
  // The send cannot have finished: nothing receives it yet, and the socket buffers are small.
  job.signal(0, SIGSTOP);
  auto b = t->register_buffer(buf.data(), buf.size());
  auto r = t->irecv(0, *b, 0, buf.size(), 42);
  const auto t0 = Clock::now();
  try {
    r->wait(10s);
    FAIL() << "received a whole message from a stopped rank";
  } catch (const TimeoutError& e) {
    FAIL() << "the transport did not notice the silence: " << e.what();
  } catch (const IoError& e) {
    EXPECT_TRUE(contains(e.what(), "rank 0 (")) << e.what();
  }
  EXPECT_LT(Clock::now() - t0, 2 * opts.timeout) << "noticed the silence late";
  // Part of the message arrived (what the socket buffers held), the end did not.
  ASSERT_EQ(buf.front(), 'a');
  ASSERT_EQ(buf.back(), 0);
  std::fill(buf.begin(), buf.end(), 'z');  // the caller reuses its buffer
  job.signal(0, SIGCONT);
  job.pump_for(300ms);
  const size_t changed = buf.size() - static_cast<size_t>(std::count(buf.begin(), buf.end(), 'z'));
  EXPECT_EQ(changed, 0u) << "bytes written into rank 1's buffer after its receive failed";
}

// Rank 0 gives up (abort) in the middle of sending and reuses its buffer at once. The frame on
// the wire must still carry the original bytes. Rank 1 posts its receive only after that, so
// that the send is sure to be stuck in the middle (TCP flow control) when rank 0 gives up, and
// the abort frame, which follows the data on the socket, reaches rank 1 only after the data.
// Ranks are threads here.
TEST(FaultBuffers, NoSendFromBufferAfterFailure) {
  InProcStore store;
  const TcpOptions opts = one_socket_options(64 << 10);
  std::atomic<int> stage{0};  // 1: rank 0 gave up and reused its buffer; 2: rank 1 is done
  std::string error0, error1;
  bool send_finished = false, received = false;
  size_t original_bytes = 0;
  {
    std::jthread rank0([&] {
      try {
        std::vector<char> buf(kHuge, 'a');  // outlives the transport and its requests
        auto t = make_tcp_transport(store, 0, 2, opts);
        auto b = t->register_buffer(buf.data(), buf.size());
        auto s = t->isend(1, *b, 0, buf.size(), 42);
        try {
          s->wait(50ms);
          send_finished = true;
        } catch (const TimeoutError&) {
        }
        t->abort("test: giving up in the middle of a send");
        std::fill(buf.begin(), buf.end(), 'b');  // the caller reuses its buffer
        stage = 1;
        while (stage.load() < 2) std::this_thread::sleep_for(1ms);
      } catch (const std::exception& e) {
        error0 = e.what();
      }
    });
    std::jthread rank1([&] {
      try {
        std::vector<char> buf(kHuge, 0);
        auto t = make_tcp_transport(store, 1, 2, opts);
        auto b = t->register_buffer(buf.data(), buf.size());
        while (stage.load() < 1) std::this_thread::sleep_for(100us);
        auto r = t->irecv(0, *b, 0, buf.size(), 42);
        r->wait(30s);
        received = true;
        original_bytes = static_cast<size_t>(std::count(buf.begin(), buf.end(), 'a'));
      } catch (const std::exception& e) {
        error1 = e.what();
      }
      stage = 2;
    });
  }
  EXPECT_EQ(error0, "");
  EXPECT_FALSE(send_finished) << "a send of 32 MiB finished with no receive posted";
  EXPECT_EQ(error1, "") << "the message in progress should have arrived whole before the abort";
  EXPECT_TRUE(received);
  EXPECT_EQ(original_bytes, kHuge)
      << "rank 1 received bytes that rank 0 wrote into its buffer after its send failed";
}

}  // namespace
}  // namespace ringbench
