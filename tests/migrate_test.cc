// Live migration of a training rank (runner/migrate/): the framebuffer's dirty tracking, the
// authenticated, validated stream, the listener that refuses strangers side by side (source_gate.h),
// the copier's rounds, the state record and the plan's checks.
// End to end (a job whose rank moves): migrate_cli_test.cc.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/errors.h"
#include "collectives/auth.h"
#include "collectives/net.h"
#include "runner/migrate/copier.h"
#include "runner/migrate/framebuffer.h"
#include "runner/migrate/migration.h"
#include "runner/migrate/rank_state.h"
#include "runner/migrate/source_gate.h"
#include "runner/migrate/target_process.h"
#include "runner/migrate/wire.h"
#include "tests/run_command.h"

namespace ringbench::migrate {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
constexpr size_t kChunk = Framebuffer::kChunkBytes;

bool same_bytes(const Framebuffer& a, const Framebuffer& b) {
  std::vector<char> x(kChunk), y(kChunk);
  for (size_t c = 0; c < a.chunks(); ++c) {
    a.read(c * kChunk, x.data(), a.chunk_bytes(c));
    b.read(c * kChunk, y.data(), b.chunk_bytes(c));
    if (std::memcmp(x.data(), y.data(), a.chunk_bytes(c)) != 0) return false;
  }
  return true;
}

TEST(Framebuffer, WritesMarkTheirChunksAndTakingCleansThem) {
  Framebuffer fb(3 * kChunk + 100, 7);
  EXPECT_EQ(fb.chunks(), 4u);
  EXPECT_EQ(fb.chunk_bytes(3), 100u);
  EXPECT_EQ(fb.dirty_bytes(), fb.size());  // nothing copied yet
  std::vector<char> out(kChunk);
  for (size_t c = 0; c < fb.chunks(); ++c) EXPECT_EQ(fb.take_if_dirty(c, out.data()), fb.chunk_bytes(c));
  EXPECT_EQ(fb.dirty_bytes(), 0u);
  EXPECT_EQ(fb.take_if_dirty(1, out.data()), 0u);
  const std::vector<char> data(kChunk, 'x');  // straddles chunks 0 and 1
  fb.write(kChunk - 10, data.data(), 20);
  EXPECT_EQ(fb.dirty_bytes(), 2 * kChunk);
  fb.write(3 * kChunk + 99, data.data(), 1);
  EXPECT_EQ(fb.dirty_bytes(), 2 * kChunk + 100);
  EXPECT_THROW(fb.write(fb.size() - 1, data.data(), 2), Error);
  EXPECT_THROW(fb.chunk_data(4), Error);
  fb.chunk_data(0);  // in place: clean from now on
  EXPECT_EQ(fb.dirty_bytes(), kChunk + 100);
}

// A connected pair of loopback sockets through the handshake, the target's side on a thread.
struct Link {
  int source = -1, target = -1;
  Link(const std::string& source_secret, const std::string& target_secret, const StreamShape& s,
       const StreamShape& expected, std::chrono::milliseconds wait = 5000ms) {
    int port = 0;
    int listen_fd = net::listen_tcp("127.0.0.1", 0, &port);
    auto accepted = std::async(std::launch::async, [&] {
      return accept_source(listen_fd, target_secret, expected, std::chrono::steady_clock::now() + wait, 5000ms);
    });
    std::exception_ptr source_error;
    try {
      source = connect_target("127.0.0.1", port, source_secret, s, 5000ms);
    } catch (...) {
      source_error = std::current_exception();
    }
    try {
      target = accepted.get();
    } catch (...) {
      net::close_fd(listen_fd);
      net::close_fd(source);
      throw;
    }
    net::close_fd(listen_fd);
    if (source_error) std::rethrow_exception(source_error);
  }
  ~Link() {
    net::close_fd(source);
    net::close_fd(target);
  }
};

TEST(Wire, RefusesAPeerWithoutTheSecretAndAMismatchedFramebuffer) {
  const std::string secret = auth::new_secret();
  const StreamShape shape{4 * kChunk, kChunk, 42};
  EXPECT_THROW(Link(auth::new_secret(), secret, shape, shape, 500ms), Error);
  StreamShape other = shape;
  other.framebuffer_bytes += kChunk;
  try {
    Link(secret, secret, other, shape);
    FAIL() << "a stream of another framebuffer size was accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(testing::has_all(e.what(), {"framebuffer of", "this target holds"}));
  }
}

TEST(Wire, ValidatesEveryRecordBeforeUsingIt) {
  const std::string secret = auth::new_secret();
  const StreamShape shape{2 * kChunk, kChunk, 1};
  Framebuffer fb(2 * kChunk, 0);
  uint64_t got = 0;
  {
    Link l(secret, secret, shape, shape);
    const std::vector<char> data(kChunk, 'a');
    send_chunk(l.source, 2, data.data(), kChunk, 1000ms);  // past the end
    EXPECT_THROW(receive_stream(l.target, fb, 1000ms, &got), Error);
  }
  {
    Link l(secret, secret, shape, shape);
    send_done(l.source, 1000ms);  // no state
    EXPECT_THROW(receive_stream(l.target, fb, 1000ms, &got), Error);
  }
  {
    Link l(secret, secret, shape, shape);
    EXPECT_THROW(receive_stream(l.target, fb, 200ms, &got), TimeoutError);  // a silent source
  }
}

// A stranger on the target's port: a plain TCP connection that sends `bytes` (none: it stays idle).
int stranger(int port, const std::string& bytes = "") {
  const int fd = net::connect_tcp("127.0.0.1", port, std::chrono::steady_clock::now() + 5s);
  if (!bytes.empty()) {
    EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size()));
  }
  return fd;
}

// Whether the target closed `fd` within 5 s (it refused the connection).
bool closed_by_target(int fd) {
  pollfd p{fd, POLLIN, 0};
  char c;
  return ::poll(&p, 1, 5000) == 1 && ::recv(fd, &c, 1, 0) <= 0;
}

// A source of this stream without the secret: a proper hello, then a MAC made with another secret.
void send_hello_and_wrong_mac(int fd, const StreamShape& s) {
  std::string hello = "RBMIG001";
  for (uint64_t v : {s.framebuffer_bytes, s.chunk_bytes, s.signature})
    hello.append(reinterpret_cast<const char*>(&v), sizeof v);
  hello += auth::random_bytes(auth::kNonceBytes);
  ASSERT_EQ(::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL), ssize_t(hello.size()));
  char reply[auth::kNonceBytes + auth::kMacBytes];
  ASSERT_TRUE(net::read_all(fd, reply, sizeof reply, std::chrono::steady_clock::now() + 5s)) << "no handshake reply";
  const std::string mac = auth::random_bytes(auth::kMacBytes);
  ASSERT_EQ(::send(fd, mac.data(), mac.size(), MSG_NOSIGNAL), ssize_t(mac.size()));
}

// The target's listener with `strangers` connected before the source: the source gets in at once.
struct Knocked {
  std::string secret = auth::new_secret();
  StreamShape shape{4 * kChunk, kChunk, 42};
  int port = 0, listen_fd = net::listen_tcp("127.0.0.1", 0, &port);
  std::vector<int> strangers;
  ~Knocked() {
    for (int& fd : strangers) net::close_fd(fd);
    net::close_fd(listen_fd);
  }
  // The source's connection, and the target's, with the target's refusals.
  std::pair<int, int> connect_source(SourceRefusals* refused) {
    auto accepted = std::async(std::launch::async, [&] {
      return accept_source(listen_fd, secret, shape, std::chrono::steady_clock::now() + 20s, 10000ms, refused);
    });
    int source = -1;
    try {
      source = connect_target("127.0.0.1", port, secret, shape, 10000ms);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the source was kept out: " << e.what();
    }
    int target = -1;
    try {
      target = accepted.get();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the target took a stranger for its source: " << e.what();
    }
    return {source, target};
  }
};

// Idle connections made before the source's (one, three, more than the listener keeps pending)
// neither keep it out nor cost it their hello's wait: it is in well within one hello window.
TEST(SourceGate, IdleStrangersDoNotKeepTheSourceOut) {
  for (size_t n : {size_t(1), size_t(3), kMaxPendingStrangers + 4}) {
    Knocked k;
    for (size_t i = 0; i < n; ++i) k.strangers.push_back(stranger(k.port));
    const auto t0 = std::chrono::steady_clock::now();
    SourceRefusals refused;
    auto [source, target] = k.connect_source(&refused);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << n << " idle strangers";
    EXPECT_GE(source, 0);
    EXPECT_GE(target, 0);
    EXPECT_EQ(refused.count, int64_t(n)) << refused.last;  // each one turned away, none served
    net::close_fd(source);
    net::close_fd(target);
  }
}

// Garbage and a hello whose MAC is made without the secret are refused, counted and named; the
// source that comes next is served.
TEST(SourceGate, StrangersSendingGarbageOrAWrongMacAreRefusedAndCounted) {
  Knocked k;
  SourceRefusals refused;
  auto accepted = std::async(std::launch::async, [&] {
    return accept_source(k.listen_fd, k.secret, k.shape, std::chrono::steady_clock::now() + 20s, 10000ms, &refused);
  });
  const int garbage = stranger(k.port, std::string(64, 'x'));
  const int liar = stranger(k.port);
  k.strangers = {garbage, liar};
  send_hello_and_wrong_mac(liar, k.shape);
  EXPECT_TRUE(closed_by_target(garbage));
  EXPECT_TRUE(closed_by_target(liar));
  int source = -1, target = -1;
  try {
    source = connect_target("127.0.0.1", k.port, k.secret, k.shape, 10000ms);
    target = accepted.get();
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  EXPECT_EQ(refused.count, 2);
  EXPECT_TRUE(testing::has_all(refused.last, {"a connection from 127.0.0.1:", "does not know the job's secret"}))
      << refused.last;
  net::close_fd(source);
  net::close_fd(target);
}

// No source ever comes, only strangers: the error says how many were refused and why the last was,
// and no stranger holds the target longer than its hello window.
TEST(SourceGate, WithoutASourceTheErrorCountsTheRefusedStrangers) {
  Knocked k;
  k.strangers = {stranger(k.port), stranger(k.port, "GET / HTTP/1.0\r\n\r\n" + std::string(64, ' ')), stranger(k.port)};
  try {
    accept_source(k.listen_fd, k.secret, k.shape, std::chrono::steady_clock::now() + 1500ms, 300ms);
    FAIL() << "a stranger was taken for the source";
  } catch (const TimeoutError& e) {
    EXPECT_TRUE(testing::has_all(e.what(), {"no migration source that knows the job's secret connected within 1.5 s",
                                            "refused 3 unauthenticated connections", "127.0.0.1:"}))
        << e.what();
  }
}

// Whether a stun overlapped the refusals: the last refusal at or after its start.
TEST(SourceGate, RefusalsSayWhetherTheyFellInAWindowAndHowMany) {
  SourceRefusals r;
  EXPECT_FALSE(r.any_since(0));
  EXPECT_EQ(r.summary(), "");
  r = {.count = 1, .last_ns = 100, .last = "a connection from 10.0.0.9:4242 sent no hello within 5000 ms"};
  EXPECT_TRUE(r.any_since(100));
  EXPECT_FALSE(r.any_since(101));
  EXPECT_EQ(r.summary(), "refused 1 unauthenticated connection (the last: a connection from 10.0.0.9:4242 sent no "
                         "hello within 5000 ms)");
}

// The copier over a real stream into a target framebuffer: what arrives is what the source holds.
void copy_and_compare(bool precopy) {
  const std::string secret = auth::new_secret();
  Framebuffer src(5 * kChunk + 7, 99), dst(5 * kChunk + 7, 0);
  const StreamShape shape{src.size(), kChunk, 5};
  int port = 0;
  int listen_fd = net::listen_tcp("127.0.0.1", 0, &port);
  auto received = std::async(std::launch::async, [&] {
    const int fd = accept_source(listen_fd, secret, shape, std::chrono::steady_clock::now() + 5s, 5000ms);
    uint64_t bytes = 0;
    std::string state = receive_stream(fd, dst, 5000ms, &bytes);
    send_stored(fd, 5000ms);
    int f = fd;
    net::close_fd(f);
    return state;
  });
  Copier copier(src, [&] { return connect_target("127.0.0.1", port, secret, shape, 5000ms); },
                {.precopy = precopy, .max_rounds = 4}, 5000ms);
  while (!copier.ready_to_stun()) std::this_thread::sleep_for(1ms);
  const std::vector<char> late(300, 'z');
  src.write(kChunk * 2 + 5, late.data(), late.size());  // written after the pre-copy: sent stunned
  copier.finish("the state", {});
  EXPECT_EQ(received.get(), "the state");
  net::close_fd(listen_fd);
  EXPECT_TRUE(same_bytes(src, dst));
  const std::vector<Round> rounds = copier.rounds();
  ASSERT_FALSE(rounds.empty());
  EXPECT_TRUE(rounds.back().stunned);
  if (precopy) {
    EXPECT_EQ(rounds.front().bytes, src.size());   // round 1: everything
    EXPECT_EQ(rounds.back().bytes, kChunk);        // the stun: only the chunk written since
  } else {
    EXPECT_EQ(rounds.size(), 1u);
    EXPECT_EQ(rounds.back().bytes, src.size());
  }
}

TEST(Copier, PreCopySendsEverythingOnceThenOnlyWhatChanged) { copy_and_compare(true); }
TEST(Copier, StopAndCopySendsEverythingWhileStunned) { copy_and_compare(false); }

TEST(RankState, LayoutRefusesAFramebufferTooSmallForTheState) {
  const StateLayout l = layout_state(1000, 10, 5000, 1 << 20);
  EXPECT_EQ(l.momentum, 4000u);
  EXPECT_EQ(l.end, 8040u + 5000u);
  try {
    layout_state(1 << 20, 0, 0, 1 << 20);
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(testing::has_all(e.what(), {"does not fit its framebuffer", "--framebuffer"}));
  }
}

TEST(RankState, LoopStateRoundTripsAndBadRecordsAreRefused) {
  LoopState s;
  s.steps_done = 7;
  s.cursor = {2, 64};
  s.traced = 1;
  s.begin_ns = 123;
  s.stun_ns = 456;
  s.cpu_s = 0.75;
  models::StepRecord r;
  r.step = 5;
  r.step_s = 0.5;
  r.cpu_s = 0.4;
  r.loss = 2.25;
  r.bucket_ready_s = {0.1, 0.2};
  r.bucket_allreduce_s = {0.01, 0.02};
  s.measured = {r};
  const LoopState back = decode_loop_state(encode(s), 10, 2);
  EXPECT_EQ(back.steps_done, 7);
  EXPECT_EQ(back.cursor, s.cursor);
  ASSERT_EQ(back.measured.size(), 1u);
  EXPECT_EQ(back.measured[0].loss, 2.25);
  EXPECT_EQ(back.measured[0].cpu_s, 0.4);
  EXPECT_EQ(back.cpu_s, 0.75);
  EXPECT_EQ(back.measured[0].bucket_allreduce_s, r.bucket_allreduce_s);
  EXPECT_THROW(decode_loop_state(encode(s), 7, 2), Error);   // steps_done past the run
  EXPECT_THROW(decode_loop_state(encode(s), 10, 3), Error);  // another bucket plan
  EXPECT_THROW(decode_loop_state("[1]", 10, 2), Error);
  json j = json::parse(encode(s));
  j["measured"][0]["step_s"] = "fast";
  EXPECT_THROW(decode_loop_state(j.dump(), 10, 2), Error);
  json k = json::parse(encode(s));
  k["cpu_s"] = -1;  // the window's CPU time so far
  EXPECT_THROW(decode_loop_state(k.dump(), 10, 2), Error);
}

TEST(MigratePlan, ChecksItsOptions) {
  MigrateArgs a;
  a.at_step = 3;
  EXPECT_EQ(make_plan(a, 3, 1, 10, 0, 100).rank, 2);
  EXPECT_EQ(make_plan(a, 3, 1, 10, 0, 100).framebuffer_bytes, kChunk);  // the state, in whole chunks
  EXPECT_EQ(make_plan(a, 3, 1, 10, uint64_t(1) << 30, 100).framebuffer_bytes, uint64_t(1) << 30);
  auto error_of = [](const MigrateArgs& m, int ranks) {
    try {
      make_plan(m, ranks, 1, 10, 0, 100);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of(a, 1).find("at least 2 ranks"), std::string::npos);
  MigrateArgs b = a;
  b.rank = 0;
  EXPECT_NE(error_of(b, 3).find("rank 0 writes"), std::string::npos);
  b = a;
  b.at_step = 1;
  EXPECT_NE(error_of(b, 3).find("after the warmup"), std::string::npos);
  b = a;
  b.method = "teleport";
  EXPECT_NE(error_of(b, 3).find("precopy or stopcopy"), std::string::npos);
  b = a;
  const std::string c = std::to_string(affinity().front());  // a CPU this test may use
  b.cpus = c + "," + c + "-" + c;
  EXPECT_EQ(make_plan(b, 3, 1, 10, 0, 100).cpus, std::vector<int>{affinity().front()});
  b.cpus = "1x";
  EXPECT_NE(error_of(b, 3).find("--migrate-cpus 1x: '1x' is not a CPU number"), std::string::npos);
  // A standby target (--migrate-to standby) runs where it was started, and is nobody's child.
  b = a;
  b.to = "standby";
  EXPECT_TRUE(make_plan(b, 3, 1, 10, 0, 100).standby);
  EXPECT_FALSE(make_plan(a, 3, 1, 10, 0, 100).standby);
  b.netns = "ringbench-n3";
  EXPECT_NE(error_of(b, 3).find("a standby (--migrate-to standby) runs where it was started"), std::string::npos);
  b.netns = "";
  b.fault = "target-killed";
  EXPECT_NE(error_of(b, 3).find("a standby is not its child"), std::string::npos);
  b = a;
  b.to = "elsewhere";
  EXPECT_NE(error_of(b, 3).find("--migrate-to elsewhere is not known: use local or standby"), std::string::npos);
  b = a;
  b.standby = true;
  EXPECT_NE(error_of(b, 3).find("--migrate-standby is the target of --migrate-to standby"), std::string::npos);
  b.to = "standby";
  b.at_step = 0;
  EXPECT_NE(error_of(b, 3).find("need --migrate-at"), std::string::npos);
}

// The target's CPUs: a taskset-style list, each CPU one this machine has; the list the target
// reports through the store is checked before it reaches the results.
TEST(TargetCpus, ParsedAndChecked) {
  const int n = int(::sysconf(_SC_NPROCESSORS_CONF));
  EXPECT_TRUE(parse_cpu_list("", "--x").empty());
  EXPECT_EQ(parse_cpu_list("0", "--x"), std::vector<int>{0});
  if (n >= 2) {
    EXPECT_EQ(parse_cpu_list("1,0-1", "--x"), (std::vector<int>{0, 1}));
  }
  auto error_of = [](const std::string& text) {
    try {
      parse_cpu_list(text, "--x");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of(std::to_string(n)).find("does not exist (this machine has CPUs 0-"), std::string::npos);
  EXPECT_NE(error_of("-1").find("is not a CPU number"), std::string::npos);
  EXPECT_NE(error_of("0,").find("'' is not a CPU number"), std::string::npos);
  EXPECT_NE(error_of("1-0").find("the range 1-0 is empty"), std::string::npos);
  EXPECT_NE(error_of("99999999999").find("is not a CPU number"), std::string::npos);
  EXPECT_FALSE(affinity().empty());

  EXPECT_EQ(checked_cpu_list(nlohmann::json::array({0}), "k"), std::vector<int>{0});
  for (const char* bad : {"[0, 0]", "[-1]", "[1.5]", "[\"0\"]", "{}", "[4096]"}) {
    try {
      checked_cpu_list(nlohmann::json::parse(bad), "k");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("store key k"), std::string::npos) << bad;
    }
  }
}

// A CPU outside the cgroup's cpuset is refused when the plan is made, naming the CPU, rather than
// by a target that dies inside the stun. A thread of this test moves into a cpuset of one CPU
// (cgroup v1 moves single threads), and the check, from there, sees what a target would.
TEST(TargetCpus, OutsideTheCpusetIsRefusedAtStartup) {
  EXPECT_NO_THROW(check_cpus_allowed(affinity(), "--x"));
  const std::string root = "/sys/fs/cgroup/cpuset";
  const std::vector<int> mine = affinity();
  if (::geteuid() != 0 || ::access((root + "/tasks").c_str(), W_OK) != 0 || mine.size() < 2)
    GTEST_SKIP() << "needs root, a cgroup v1 cpuset hierarchy at " << root << " and 2 CPUs";
  const std::string in = std::to_string(mine[0]), out = std::to_string(mine[1]);
  auto read = [](const std::string& path) {
    std::ifstream f(path);
    std::string line;
    std::getline(f, line);
    return line;
  };
  auto put = [](const std::string& path, const std::string& value) {
    std::ofstream f(path);
    f << value;
    f.close();
    return bool(f);
  };
  // This thread's cpuset (the line "N:cpuset:/path" of /proc/thread-self/cgroup), to go back to.
  std::string home = root;
  for (std::ifstream f("/proc/thread-self/cgroup"); f;) {
    std::string line;
    if (!std::getline(f, line)) break;
    if (const size_t at = line.find(":cpuset:"); at != std::string::npos) home = root + line.substr(at + 8);
  }
  const std::string dir = root + "/ringbench-test-" + std::to_string(::getpid());
  if (::mkdir(dir.c_str(), 0755) != 0) GTEST_SKIP() << "cannot make " << dir << ": " << std::strerror(errno);
  std::string none, partial, setup;
  std::thread([&] {
    const std::string tid = std::to_string(::gettid());
    if (!put(dir + "/cpuset.cpus", in) || !put(dir + "/cpuset.mems", read(root + "/cpuset.mems")) ||
        !put(dir + "/tasks", tid)) {
      setup = "could not make a cpuset of CPU " + in + " at " + dir;
      return;
    }
    for (auto [cpus, text] : {std::pair{std::vector<int>{mine[1]}, &none}, std::pair{mine, &partial}}) {
      try {
        check_cpus_allowed(cpus, "--migrate-cpus X");
      } catch (const std::exception& e) {
        *text = e.what();
      }
    }
    put(home + "/tasks", tid);
  }).join();
  for (int i = 0; i < 50 && ::rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i)  // the thread leaves it late
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_NE(::access(dir.c_str(), F_OK), 0) << dir << " is left behind";
  if (!setup.empty()) GTEST_SKIP() << setup;
  EXPECT_NE(none.find("--migrate-cpus X: this process may not run on CPU " + out + " (outside its cgroup's cpuset"),
            std::string::npos) << none;
  EXPECT_NE(partial.find("(outside its cgroup's cpuset; of the list it may use " + in + ")"), std::string::npos)
      << partial;
}

}  // namespace
}  // namespace ringbench::migrate
