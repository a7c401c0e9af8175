// The transport contract on the shared-memory transport, with threads as ranks: ordering over
// varied sizes (zero, and larger than the ring), unexpected messages, progress that does not
// depend on the request waited on, tag/length mismatches, bounds, abort, a peer leaving,
// timeouts that name the peer, nothing left in /dev/shm; a fake peer that corrupts the shared
// memory (every bad value is an IoError naming it); the ring allreduce over shm; and forked
// processes as ranks, with a SIGKILLed or SIGSTOPped rank named by every survivor.
#include <gtest/gtest.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <barrier>
#include <climits>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "collectives/allreduce.h"
#include "collectives/reduce.h"
#include "collectives/ring_allreduce.h"
#include "collectives/stream_reduce.h"
#include "collectives/transport/shm/shm_segment.h"
#include "collectives/transport/shm/shm_transport.h"
#include "collectives/verify.h"
#include "tests/process_ranks.h"
#include "tests/rank_threads.h"
#include "tests/transport_contract.h"

namespace ringbench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::run_threads;

// A job id of this test process, so that /dev/shm checks see only our segments.
std::string job_id(const std::string& what) { return "shmtest-" + std::to_string(::getpid()) + "-" + what; }

ShmOptions opts(const std::string& job = "t", size_t ring_bytes = 16 << 10, std::chrono::milliseconds timeout = 5000ms,
               bool single_copy = true) {
  ShmOptions o;
  o.job_id = job_id(job);
  o.ring_bytes = ring_bytes;
  o.timeout = timeout;
  o.single_copy_bytes = single_copy ? size_t{64} << 10 : 0;
  return o;
}

void run_shm(int n, const std::function<void(Transport&)>& body, const ShmOptions& o = opts()) {
  InProcStore store;
  run_threads(n, [&](int r) {
    auto t = make_shm_transport(store, r, n, o);
    body(*t);
  });
}

// run_shm with the default options, as the contract checks run ranks.
void shm_ranks(int n, const std::function<void(Transport&)>& body) { run_shm(n, body); }

// Names in /dev/shm that belong to `job`.
std::vector<std::string> leftovers(const std::string& job) {
  std::vector<std::string> v;
  for (auto& e : std::filesystem::directory_iterator("/dev/shm"))
    if (e.path().filename().string().find(job) != std::string::npos) v.push_back(e.path().string());
  return v;
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// ---- the contract, threads as ranks --------------------------------------------------------

TEST(ShmTransport, DeclaresHostMemoryAndPath) {
  run_shm(2, [](Transport& t) {
    testing::expect_host_memory_only(t, "shm");
    auto p = t.path_info();
    EXPECT_EQ(p["ring_bytes"], std::to_string(16 << 10));
    EXPECT_EQ(p["wakeup"], "futex");
    EXPECT_EQ(p["spin_us"], "200");
    EXPECT_EQ(p["single_copy"], "cma >= 65536 bytes");  // threads of one process may read each other
    EXPECT_EQ(t.caps().forward_bytes, size_t{4} << 10);  // a quarter of the ring
    EXPECT_EQ(p["forward_bytes"], "4096");
  });
  // --shm-reduce forward (the default), ring and copy: what the caps offer and the path says.
  struct Way {
    bool in_ring, forward;
    const char* says;
  };
  for (Way w : {Way{true, true, "on the way to the next rank"}, Way{true, false, "from the ring"},
                Way{false, false, "after a copy"}}) {
    SCOPED_TRACE(w.says);
    ShmOptions o = opts("reduce");
    o.reduce_in_ring = w.in_ring;
    o.forward = w.forward;
    run_shm(2, [&](Transport& t) {
      EXPECT_EQ(t.path_info()["reduce"], w.says);
      EXPECT_EQ(t.caps().recv_sink, w.in_ring);
      EXPECT_EQ(t.caps().forward, w.forward);
      EXPECT_EQ(t.path_info().count("forward_bytes"), w.forward ? 1u : 0u);
      if (!w.in_ring) {
        EXPECT_THROW(t.irecv_sink(1 - t.rank(), 4, 1, [](const char*, size_t) {}), Error);
      }
    }, o);
  }
}

// A sink receive reduces a message as it streams through the 16 KiB ring (wrapping it many
// times), or out of the sender's memory through a bounce buffer (single-copy), exactly. A
// 6-byte message before it leaves the float payload misaligned in the ring, so pieces split
// elements.
TEST(ShmTransport, SinkReceivesReduceOutOfTheRingExactlyAtAnyAlignment) {
  for (bool single_copy : {false, true}) {
    SCOPED_TRACE(single_copy ? "single-copy" : "ring only");
    run_shm(2, [&](Transport& t) {
      constexpr size_t n = 40001;
      std::vector<float> sent(n), a(n), got(n, -1.f), want(n);
      fill_input(DType::f32, sent.data(), n, 0, 2);
      fill_input(DType::f32, a.data(), n, 1, 2);
      reduce_sum(DType::f32, want.data(), a.data(), sent.data(), n);
      char odd[6] = {1, 2, 3, 4, 5, 6};
      auto ob = t.register_buffer(odd, sizeof odd);
      auto sb = t.register_buffer(sent.data(), n * 4);
      for (int round = 0; round < 3; ++round) {
        if (t.rank() == 0) {
          t.isend(1, *ob, 0, sizeof odd, 7)->wait(5s);
          t.isend(1, *sb, 0, n * 4, 8)->wait(5s);
        } else {
          t.irecv(0, *ob, 0, sizeof odd, 7)->wait(5s);
          StreamReducer sink(DType::f32, reinterpret_cast<char*>(got.data()), reinterpret_cast<const char*>(a.data()), 0);
          t.irecv_sink(0, n * 4, 8, sink)->wait(5s);
          EXPECT_EQ(std::memcmp(got.data(), want.data(), n * 4), 0) << "round " << round;
        }
      }
    }, opts("sink", 16 << 10, 5000ms, single_copy));
  }
}

// Forwards (irecv_forward): rank 1 reduces what rank 0 sends into rank 2's ring as it arrives.
// A 64 KiB message queued ahead to rank 2 fills its 16 KiB ring, so the first forwards wait in
// home and go out from there, later ones go straight in (and wrap the ring); sizes of 0, odd
// and many ring lengths, in order, exact in home (kept) and at rank 2. Through single-copy too.
TEST(ShmTransport, ForwardsGoOnInOrderStraightInOrFromHome) {
  const std::vector<size_t> sizes = {0, 1, 3, 1000, 10001, 40001};
  size_t total = 0;
  for (size_t m : sizes) total += m;
  for (bool single_copy : {false, true}) {
    SCOPED_TRACE(single_copy ? "single-copy" : "ring only");
    run_shm(3, [&](Transport& t) {
      std::vector<float> sent(total), a(total), want(total), got(total, -1.f), ahead(16384, 5.f);
      fill_input(DType::f32, sent.data(), total, 0, 3);
      fill_input(DType::f32, a.data(), total, 1, 3);
      reduce_sum(DType::f32, want.data(), a.data(), sent.data(), total);
      auto sb = t.register_buffer(sent.data(), total * 4);
      auto gb = t.register_buffer(got.data(), total * 4);
      auto ab = t.register_buffer(ahead.data(), ahead.size() * 4);
      std::vector<std::unique_ptr<Request>> reqs;
      size_t off = 0;
      if (t.rank() == 1) reqs.push_back(t.isend(2, *ab, 0, ahead.size() * 4, 99));
      if (t.rank() == 2) t.irecv(1, *ab, 0, ahead.size() * 4, 99)->wait(5s);
      for (size_t m : sizes) {
        const size_t at = off * 4;
        if (t.rank() == 0) reqs.push_back(t.isend(1, *sb, at, m * 4, m));
        if (t.rank() == 2) reqs.push_back(t.irecv(1, *gb, at, m * 4, m));
        if (t.rank() == 1) {
          ForwardStep step{DType::f32, reinterpret_cast<char*>(got.data()) + at, reinterpret_cast<const char*>(a.data()) + at, 0, true};
          Forward f = t.irecv_forward(0, 2, m * 4, m, *gb, at, step);
          reqs.push_back(std::move(f.recv));
          reqs.push_back(std::move(f.send));
        }
        off += m;
      }
      for (auto& r : reqs) r->wait(5s);
      if (t.rank() > 0) {
        EXPECT_EQ(std::memcmp(got.data(), want.data(), total * 4), 0) << "rank " << t.rank();
      }
    }, opts("forward", 16 << 10, 5000ms, single_copy));
  }
}

// A forward back to the rank it came from (the ring of two ranks), copying: what comes back is
// what went out. A forward function that throws fails the transport, naming the sender.
TEST(ShmTransport, ForwardsBackToTheSenderAndTheirFailureNamesIt) {
  run_shm(2, [](Transport& t) {
    constexpr size_t n = 30001;
    std::vector<float> sent(n), home(n, -1.f), back(n, -2.f);
    fill_input(DType::f32, sent.data(), n, 0, 2);
    auto sb = t.register_buffer(sent.data(), n * 4);
    auto hb = t.register_buffer(home.data(), n * 4);
    auto bb = t.register_buffer(back.data(), n * 4);
    if (t.rank() == 0) {
      auto s = t.isend(1, *sb, 0, n * 4, 4);
      t.irecv(1, *bb, 0, n * 4, 4)->wait(5s);
      s->wait(5s);
      EXPECT_EQ(std::memcmp(back.data(), sent.data(), n * 4), 0);
    } else {
      Forward f = t.irecv_forward(0, 0, n * 4, 4, *hb, 0, ForwardStep{DType::f32, reinterpret_cast<char*>(home.data()), nullptr, 0, true});
      f.recv->wait(5s);
      f.send->wait(5s);
      EXPECT_EQ(std::memcmp(home.data(), sent.data(), n * 4), 0);
    }
  });
  run_shm(3, [](Transport& t) {
    std::vector<char> data(1024, 'x');
    auto b = t.register_buffer(data.data(), data.size());
    if (t.rank() == 0) {
      auto s = t.isend(1, *b, 0, 1024, 3);
      try { s->wait(5s); } catch (const IoError&) {}
    } else if (t.rank() == 1) {
      Forward f = t.irecv_forward(0, 2, 1024, 3, *b, 0, [](const char*, size_t, size_t, char*) { throw std::runtime_error("no room"); });
      try {
        f.recv->wait(5s);
        ADD_FAILURE() << "a forward whose function threw completed";
      } catch (const IoError& e) {
        EXPECT_TRUE(contains(e.what(), "could not be forwarded: no room")) << e.what();
        EXPECT_TRUE(contains(e.what(), "rank 0")) << e.what();
      }
      EXPECT_THROW(f.send->wait(5s), IoError);
    } else {
      auto r = t.irecv(1, *b, 0, 1024, 3);
      try { r->wait(5s); } catch (const IoError&) {}
    }
  });
}

// The message is checked before a sink sees a byte: a length mismatch fails both sides and the
// sink is never called. A sink that throws fails the transport, naming the sender.
TEST(ShmTransport, SinkSeesOnlyCheckedMessagesAndItsFailureNamesTheSender) {
  run_shm(2, [](Transport& t) {
    std::vector<char> data(1024, 'x');
    auto b = t.register_buffer(data.data(), data.size());
    bool called = false;
    if (t.rank() == 0) {
      auto s = t.isend(1, *b, 0, 1024, 3);
      try { s->wait(5s); } catch (const IoError&) {}
      return;
    }
    auto r = t.irecv_sink(0, 512, 3, [&](const char*, size_t) { called = true; });
    try {
      r->wait(5s);
      ADD_FAILURE() << "a 1024-byte message matched a 512-byte sink receive";
    } catch (const IoError& e) {
      EXPECT_TRUE(contains(e.what(), "1024-byte message")) << e.what();
    }
    EXPECT_FALSE(called);
  });
  run_shm(2, [](Transport& t) {
    std::vector<char> data(1024, 'x');
    auto b = t.register_buffer(data.data(), data.size());
    if (t.rank() == 0) {
      t.isend(1, *b, 0, 1024, 3)->wait(5s);
      return;
    }
    auto r = t.irecv_sink(0, 1024, 3, [](const char*, size_t) { throw std::runtime_error("no room"); });
    try {
      r->wait(5s);
      ADD_FAILURE() << "a sink that threw completed its receive";
    } catch (const IoError& e) {
      EXPECT_TRUE(contains(e.what(), "could not be consumed: no room")) << e.what();
      EXPECT_TRUE(contains(e.what(), "rank 0")) << e.what();
    }
  });
}

TEST(ShmTransport, BadOptionsAreErrors) {
  InProcStore store;
  for (size_t rb : {size_t{0}, size_t{1000}, size_t{3} << 20, size_t{2} << 30}) {
    ShmOptions o = opts("bad", rb);
    EXPECT_THROW(make_shm_transport(store, 0, 2, o), Error) << rb;
  }
  ShmOptions o = opts();
  o.job_id = std::string(64, 'j');
  EXPECT_THROW(make_shm_transport(store, 0, 2, o), Error);
}

// Many messages of varied sizes (zero, and up to 12x the 16 KiB ring) in both directions arrive
// in posting order, with the receives posted after the sends for half of the runs.
TEST(ShmTransport, OrderedVariedSizesAndUnexpected) {
  for (bool single_copy : {false, true})
  for (bool late_receives : {false, true}) {
    SCOPED_TRACE(std::string(single_copy ? "single-copy" : "ring only") + (late_receives ? ", late receives" : ""));
    run_shm(2, [&](Transport& t) {
      const int peer = 1 - t.rank();
      const int msgs = 64;
      testing::Numbered v(t, 1 << 19);
      std::vector<std::pair<size_t, size_t>> ranges;  // elements
      for (size_t i = 0, off = 0; i < msgs; ++i) {
        size_t len = i % 16 == 5 ? 50000 : (i * 37 % 9) * 1000;  // includes zero-length messages
        ranges.push_back({off, len});
        off += len;
      }
      std::vector<std::unique_ptr<Request>> reqs;
      auto post_recvs = [&] {
        for (int i = 0; i < msgs; ++i)
          reqs.push_back(t.irecv(peer, *v.db, ranges[i].first * 4, ranges[i].second * 4, static_cast<uint64_t>(i)));
      };
      if (!late_receives) post_recvs();
      for (int i = 0; i < msgs; ++i)
        reqs.push_back(t.isend(peer, *v.sb, ranges[i].first * 4, ranges[i].second * 4, static_cast<uint64_t>(i)));
      if (late_receives) {
        std::this_thread::sleep_for(50ms);  // the ring fills before the receives exist
        post_recvs();
      }
      for (auto& r : reqs) r->wait(10s);
      ASSERT_TRUE(v.received_from(peer, ranges.back().first + ranges.back().second));
    }, opts("ordered", 16 << 10, 5000ms, single_copy));
  }
}

// Both ranks send 1 MiB through a 16 KiB ring before posting the receive, then wait for the
// receive first: only a transport that moves every pending transfer in any wait completes.
TEST(ShmTransport, ProgressDoesNotDependOnTheRequestWaitedOn) {
  for (bool single_copy : {false, true})
  run_shm(2, [](Transport& t) {
    std::vector<char> out(1 << 20, static_cast<char>('a' + t.rank())), in(1 << 20, 0);
    auto ob = t.register_buffer(out.data(), out.size());
    auto ib = t.register_buffer(in.data(), in.size());
    auto s = t.isend(1 - t.rank(), *ob, 0, out.size(), 3);
    auto r = t.irecv(1 - t.rank(), *ib, 0, in.size(), 3);
    r->wait(10s);
    s->wait(10s);
    EXPECT_EQ(in.front(), 'a' + 1 - t.rank());
    EXPECT_EQ(in.back(), 'a' + 1 - t.rank());
  }, opts("progress", 16 << 10, 5000ms, single_copy));
}

// All pairs of 4 ranks at once, each message a different size.
TEST(ShmTransport, AllPairsOfFourRanks) {
  run_shm(4, [](Transport& t) {
    const int n = t.size(), me = t.rank();
    std::vector<std::vector<char>> in(n), out(n);
    std::vector<std::unique_ptr<Buffer>> bufs;
    std::vector<std::unique_ptr<Request>> reqs;
    auto len = [](int from, int to) { return size_t(1000 + 7919 * (from * 4 + to)); };
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      out[p].assign(len(me, p), static_cast<char>(me * 16 + p));
      in[p].assign(len(p, me), 0);
      bufs.push_back(t.register_buffer(out[p].data(), out[p].size()));
      reqs.push_back(t.isend(p, *bufs.back(), 0, out[p].size(), 1));
      bufs.push_back(t.register_buffer(in[p].data(), in[p].size()));
      reqs.push_back(t.irecv(p, *bufs.back(), 0, in[p].size(), 1));
    }
    for (auto& r : reqs) r->wait(10s);
    for (int p = 0; p < n; ++p)
      if (p != me) {
        EXPECT_EQ(in[p].back(), static_cast<char>(p * 16 + me));
      }
  });
}

TEST(ShmTransport, TestPollsToCompletion) { testing::contract::test_polls_to_completion(shm_ranks); }
TEST(ShmTransport, OutOfBoundsAndBadPeerAreErrors) { testing::contract::out_of_bounds_and_bad_peer_are_errors(shm_ranks); }
TEST(ShmTransport, MismatchFailsBothSides) { testing::contract::mismatch_fails_both_sides(shm_ranks); }
TEST(ShmTransport, WaitTimesOutNamingAlivePeer) { testing::contract::wait_times_out_naming_alive_peer(shm_ranks, 3s); }

// An abort reaches a peer asleep in a wait at once (the doorbell), long before any timeout.
TEST(ShmTransport, AbortReachesSleepingPeerQuickly) {
  run_shm(2, [](Transport& t) {
    std::vector<char> buf(8);
    auto b = t.register_buffer(buf.data(), buf.size());
    if (t.rank() == 0) {
      std::this_thread::sleep_for(200ms);
      t.abort("the disk is on fire");
      return;
    }
    const auto f = testing::failed_wait<IoError>(*t.irecv(0, *b, 0, 8, 0), 20s);
    EXPECT_EQ(f.peer, 0);
    EXPECT_TRUE(contains(f.what, "rank 0 (shm pid")) << f.what;
    EXPECT_TRUE(contains(f.what, "aborted: the disk is on fire")) << f.what;
    EXPECT_LT(f.took, 5s);
  }, opts("abort", 16 << 10, 30000ms));
}

// What a peer sent before it closed its transport is still delivered; a receive beyond it fails
// naming the peer, without waiting for a timeout.
TEST(ShmTransport, PeerThatLeftDeliversWhatItSentThenFails) {
  run_shm(2, [](Transport& t) {
    std::vector<int> v(3, 0);
    auto b = t.register_buffer(v.data(), v.size() * sizeof(int));
    if (t.rank() == 1) {
      v = {10, 20, 30};
      for (int i = 0; i < 3; ++i) t.isend(0, *b, i * sizeof(int), sizeof(int), 5)->wait(5s);
      return;  // closes the transport
    }
    std::this_thread::sleep_for(200ms);
    for (int i = 0; i < 3; ++i) t.irecv(1, *b, i * sizeof(int), sizeof(int), 5)->wait(5s);
    EXPECT_EQ(v, (std::vector<int>{10, 20, 30}));
    const auto f = testing::failed_wait<IoError>(*t.irecv(1, *b, 0, sizeof(int), 5), 20s);
    EXPECT_EQ(f.peer, 1);
    EXPECT_TRUE(contains(f.what, "left the job")) << f.what;
    EXPECT_LT(f.took, 5s);
  }, opts("left", 16 << 10, 30000ms));
}

// Segments are removed as soon as every rank has mapped them, and when setup fails.
TEST(ShmTransport, NothingLeftInDevShm) {
  const ShmOptions o = opts("devshm");
  std::barrier all_set_up(3);
  run_shm(3, [&](Transport&) {
    all_set_up.arrive_and_wait();
    EXPECT_EQ(leftovers(o.job_id), std::vector<std::string>{});
  }, o);
  InProcStore store;
  ShmOptions lonely = opts("lonely", 16 << 10, 300ms);
  try {
    make_shm_transport(store, 0, 2, lonely);
    ADD_FAILURE() << "set up without its peer";
  } catch (const TimeoutError& e) {
    EXPECT_EQ(e.peer(), 1);
    EXPECT_TRUE(contains(e.what(), "rank 1")) << e.what();
  }
  EXPECT_EQ(leftovers(lonely.job_id), std::vector<std::string>{});
}

// A rank killed during setup (before its segment's name is removed) leaves the segment behind;
// the next job's setup removes it, and only it: a live process's segment stays.
TEST(ShmTransport, SegmentsOfKilledRanksAreRemovedByTheNextJob) {
  const ShmOptions o = opts("killed");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto seg = shm_segment::Segment::create(o.job_id, 0, 2, o.ring_bytes);
    const std::string name = seg.name();
    (void)!::write(fds[1], name.data(), name.size());
    ::_exit(0);  // as SIGKILL would: no destructor removes the name
  }
  ::close(fds[1]);
  char buf[256] = {};
  const ssize_t got = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  ASSERT_GT(got, 0);
  ASSERT_EQ(leftovers(o.job_id).size(), 1u) << "the killed rank's segment should be there: " << buf;
  auto live = shm_segment::Segment::create(opts("alive").job_id, 0, 2, o.ring_bytes);  // cleans up first
  EXPECT_EQ(leftovers(o.job_id), std::vector<std::string>{});
  EXPECT_EQ(leftovers(opts("alive").job_id).size(), 1u) << "a live process's segment was removed";
  shm_segment::remove_stale_segments();
  EXPECT_EQ(leftovers(opts("alive").job_id).size(), 1u) << "a live process's segment was removed";
}

// ---- a malicious or broken peer ------------------------------------------------------------

// Plays rank 1 of 2 against a real rank 0 with the segment code itself, then misbehaves.
struct FakePeer {
  shm_segment::Segment own, theirs;
  shm_layout::RingControl* to_real = nullptr;    // the ring we write, in rank 0's segment
  shm_layout::RingControl* from_real = nullptr;  // the ring rank 0 writes, in ours
  char* to_real_data = nullptr;

  FakePeer(Store& store, const ShmOptions& o) {
    using namespace shm_layout;
    own = shm_segment::Segment::create(o.job_id, 1, 2, o.ring_bytes);
    store.set("shm/segment/1", own.name());
    theirs = shm_segment::Segment::open(store.get("shm/segment/0", 5s), segment_bytes(2, o.ring_bytes), 0);
    to_real = theirs.control(ring_slot(1, 0));
    from_real = own.control(ring_slot(0, 1));
    to_real_data = theirs.ring(ring_slot(1, 0), 2, o.ring_bytes);
    from_real->cma_ok.store(1);  // "we can read your memory": rank 0 sends large messages single-copy
    store_barrier(store, "shm/mapped", 2, 5s);
    own.unlink();
  }
  void send_header(uint32_t magic, uint32_t seq, uint64_t tag, uint64_t length, uint64_t addr = 0) {
    shm_layout::FrameHeader h{magic, seq, tag, length, addr};
    std::memcpy(to_real_data, &h, sizeof h);
    to_real->head.store(sizeof h, std::memory_order_release);
  }
  // As a peer that published something does: rings rank 0's doorbell, so a sleeping rank 0
  // looks at the rings now rather than at its deadline.
  void ring_bell() {
    auto& bell = theirs.header().bell;
    bell.fetch_add(1);
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
};

// Rank 0 (real) runs `real` against a fake rank 1 that runs `misbehave`; returns rank 0's error.
std::string against_fake(const std::function<void(Transport&)>& real,
                         const std::function<void(FakePeer&)>& misbehave, const ShmOptions& o = opts("fake")) {
  InProcStore store;
  std::string error = "no error";
  std::thread rank0([&] {
    try {
      auto t = make_shm_transport(store, 0, 2, o);
      real(*t);
    } catch (const IoError& e) {
      error = (e.peer() == 1 ? "peer 1: " : "peer " + std::to_string(e.peer()) + ": ") + e.what();
    }
  });
  {
    FakePeer fake(store, o);
    misbehave(fake);
    fake.ring_bell();  // rank 0 may already sleep, waiting for data or room
    rank0.join();
  }
  EXPECT_EQ(leftovers(o.job_id), std::vector<std::string>{});
  return error;
}

void receive8(Transport& t) {
  std::vector<char> buf(8);
  auto b = t.register_buffer(buf.data(), buf.size());
  t.irecv(1, *b, 0, 8, 1)->wait(5s);
}

TEST(ShmTransportHostile, HeadOutsideTheRing) {
  auto e = against_fake(receive8, [](FakePeer& f) { f.to_real->head.store(uint64_t{1} << 40); });
  EXPECT_TRUE(contains(e, "peer 1: ") && contains(e, "corrupt")) << e;
}

TEST(ShmTransportHostile, HeadBehindTail) {
  auto e = against_fake(receive8, [](FakePeer& f) { f.to_real->head.store(~uint64_t{0}); });
  EXPECT_TRUE(contains(e, "peer 1: ") && contains(e, "corrupt")) << e;
}

// Every message takes a multiple of 8 bytes of the ring, so a position that is not is corrupt,
// for the head a writer publishes as for the tail a reader does.
TEST(ShmTransportHostile, UnalignedHeadOrTail) {
  auto e = against_fake(receive8, [](FakePeer& f) { f.to_real->head.store(3); });
  EXPECT_TRUE(contains(e, "peer 1: ") && contains(e, "corrupt")) << e;
  e = against_fake(
      [](Transport& t) {
        std::vector<char> buf(100000);
        auto b = t.register_buffer(buf.data(), buf.size());
        t.isend(1, *b, 0, buf.size(), 1)->wait(5s);
      },
      [](FakePeer& f) { f.from_real->tail.store(12); }, opts("fake", 16 << 10, 5000ms, /*single_copy=*/false));
  EXPECT_TRUE(contains(e, "peer 1: ") && contains(e, "corrupt")) << e;
}

TEST(ShmTransportHostile, BadFrameMagicAndSequence) {
  auto e = against_fake(receive8, [](FakePeer& f) { f.send_header(0xdeadbeef, 0, 1, 8); });
  EXPECT_TRUE(contains(e, "peer 1: ") && contains(e, "magic")) << e;
  e = against_fake(receive8, [](FakePeer& f) { f.send_header(shm_layout::kFrameMagic, 7, 1, 8); });
  EXPECT_TRUE(contains(e, "peer 1: ") && contains(e, "number 7")) << e;
}

TEST(ShmTransportHostile, HugeLengthIsAMismatchNotAnOverflow) {
  auto e = against_fake(receive8, [](FakePeer& f) {
    f.send_header(shm_layout::kFrameMagic, 0, 1, uint64_t{1} << 62);
  });
  EXPECT_TRUE(contains(e, "peer 1: ") && contains(e, "disagree")) << e;
}

TEST(ShmTransportHostile, TailOutsideTheRing) {
  auto e = against_fake(
      [](Transport& t) {
        std::vector<char> buf(100000);  // more than the 16 KiB ring: the sender reads the tail
        auto b = t.register_buffer(buf.data(), buf.size());
        t.isend(1, *b, 0, buf.size(), 1)->wait(5s);
      },
      [](FakePeer& f) { f.from_real->tail.store(uint64_t{1} << 50); },
      // Through the ring: single-copy would put only a header there and then wait for the
      // (never coming) acknowledgement, not for room, so a late corruption would be a timeout.
      opts("fake", 16 << 10, 5000ms, /*single_copy=*/false));
  EXPECT_TRUE(contains(e, "peer 1: ") && contains(e, "corrupt")) << e;
}

TEST(ShmTransportHostile, SingleCopyFromAnUnmappedAddress) {
  auto e = against_fake(receive8, [](FakePeer& f) { f.send_header(shm_layout::kFrameMagicCma, 0, 1, 8, 16); });
  EXPECT_TRUE(contains(e, "peer 1: ") && contains(e, "process_vm_readv")) << e;
}

TEST(ShmTransportHostile, AcknowledgesWhatWasNeverSent) {
  auto e = against_fake(
      [](Transport& t) {
        std::vector<char> buf(1 << 20);  // single-copy: the send waits for the receiver's ack
        auto b = t.register_buffer(buf.data(), buf.size());
        t.isend(1, *b, 0, buf.size(), 1)->wait(5s);
      },
      [](FakePeer& f) {
        std::this_thread::sleep_for(100ms);
        f.from_real->acked.store(5);  // rank 0 sees it within a heartbeat interval at most
      });
  EXPECT_TRUE(contains(e, "peer 1: ") && contains(e, "acknowledged 5")) << e;
}

TEST(ShmTransportHostile, BadSegmentNamesAndHeaders) {
  const std::vector<std::string> names = {"/etc/passwd", "/rb-../../x", "/rb-" + std::string(300, 'a'),
                                          "/rb-missing-1-00"};
  for (const std::string& name : names) {
    InProcStore store;
    store.set("shm/segment/1", name);
    try {
      make_shm_transport(store, 0, 2, opts("names"));
      ADD_FAILURE() << "accepted " << name;
    } catch (const IoError& e) {
      EXPECT_EQ(e.peer(), 1) << e.what();
    }
  }
  // A real segment of another job.
  InProcStore store;
  auto other = shm_segment::Segment::create(job_id("other"), 1, 2, 16 << 10);
  store.set("shm/segment/1", other.name());
  try {
    make_shm_transport(store, 0, 2, opts("names"));
    ADD_FAILURE() << "accepted a segment of another job";
  } catch (const IoError& e) {
    EXPECT_EQ(e.peer(), 1);
    EXPECT_TRUE(contains(e.what(), "job id")) << e.what();
  }
  other.unlink();
  EXPECT_EQ(leftovers(job_id("names")), std::vector<std::string>{});
}

// ---- the ring allreduce over shm, threads as ranks -----------------------------------------

class ShmRingThreads : public ::testing::TestWithParam<int> {};

TEST_P(ShmRingThreads, ExactForUnevenCounts) {
  const int n = GetParam();
  for (size_t ring_bytes : {size_t{64} << 10, size_t{1} << 20}) {
    const bool single_copy = ring_bytes > (64 << 10);  // the small ring streams every segment
    run_shm(n, [&](Transport& t) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, (size_t{1} << 18) + 3})
        for (size_t seg : {size_t{16} << 10, size_t{1} << 20})
          for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg})
            for (bool inplace : {false, true}) {
              SCOPED_TRACE("rank " + std::to_string(t.rank()) + " count " + std::to_string(count) + " seg " +
                           std::to_string(seg) + " " + op_name(op) + (inplace ? " in-place" : ""));
              std::vector<float> in(count + 1), out(count + 1, 7.f);
              fill_input(DType::f32, in.data(), count, t.rank(), n);
              AllreduceOptions ao;
              ao.algo = AllreduceAlgo::ring;
              ao.ring.segment_bytes = seg;
              ao.ring.timeout = 30s;
              Allreduce ar(t, in.data(), inplace ? in.data() : out.data(), count, DType::f32, op, ao);
              ar.run(count);
              EXPECT_EQ(count_wrong(DType::f32, inplace ? in.data() : out.data(), count, n, op), 0u);
              if (!inplace) {
                EXPECT_EQ(out[count], 7.f) << "wrote past the end";
              }
            }
    }, opts("ring" + std::to_string(n), ring_bytes, 30000ms, single_copy));
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmRingThreads, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& p) { return std::to_string(p.param) + "ranks"; });

// ---- forked processes as ranks -------------------------------------------------------------

using testing::ProcessRanks;
using testing::Report;

constexpr std::chrono::milliseconds kT{2000};

int shm_rank(int rank, int n, int port, const Report& report, const ShmOptions& o,
             const std::function<void(Transport&)>& work) {
  return testing::run_rank(port, report, [&](Store& s) { return make_shm_transport(s, rank, n, o); }, work);
}

TEST(ShmProcesses, RingExactResults) {
  constexpr int n = 3;
  const ShmOptions o = opts("procs", 256 << 10, 30000ms);
  ProcessRanks job;
  job.start(n, [&](int rank, int port, const Report& report) {
    return shm_rank(rank, n, port, report, o, [&](Transport& t) {
      report("single_copy " + t.path_info()["single_copy"]);
      for (size_t count : {size_t{7}, (size_t{1} << 20) + 3}) {
        std::vector<float> in(count), out(count);
        fill_input(DType::f32, in.data(), count, rank, n);
        RingAllreduce ring(t, in.data(), out.data(), count, DType::f32, ReduceOp::sum);
        ring.run(count);
        if (count_wrong(DType::f32, out.data(), count, n, ReduceOp::sum) != 0)
          throw std::runtime_error("wrong result for count " + std::to_string(count));
      }
    });
  });
  ASSERT_TRUE(job.pump_until(Clock::now() + 120s, [&] { return job.all_exited(); })) << job.describe();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(job.proc(r).exited_ok() && job.proc(r).find("ok")) << job.describe();
  if (const auto* l = job.proc(0).find("single_copy")) std::cerr << "[ info ] rank 0: " << l->text << "\n";
  EXPECT_EQ(leftovers(o.job_id), std::vector<std::string>{});
}

// Ranks run 4 MiB allreduces in a loop; rank 2 gets `sig`; every survivor fails naming rank 2
// within 2 x T.
void victim_mid_allreduce(int sig) {
  constexpr int n = 4, kVictim = 2;
  constexpr size_t kCount = size_t{1} << 20;
  const ShmOptions o = opts("victim", 256 << 10, kT);
  ProcessRanks job;
  job.start(n, [&](int rank, int port, const Report& report) {
    return shm_rank(rank, n, port, report, o, [&](Transport& t) {
      std::vector<float> in(kCount), out(kCount);
      fill_input(DType::f32, in.data(), kCount, rank, n);
      RingOptions ro;
      ro.timeout = 2 * kT;
      RingAllreduce ring(t, in.data(), out.data(), kCount, DType::f32, ReduceOp::sum, ro);
      for (int it = 0;; ++it) {
        ring.run(kCount);
        if (it == 0) report("iter");
      }
    });
  });
  auto all_have = [&](const std::string& what) {
    for (int r = 0; r < n; ++r)
      if (!job.proc(r).find(what) || job.proc(r).exited) return false;
    return true;
  };
  ASSERT_TRUE(job.pump_until(Clock::now() + 60s, [&] { return all_have("iter"); })) << job.describe();
  job.pump_for(300ms);
  const auto hit_at = Clock::now();
  const bool exited = job.others_exit_after_signal(kVictim, sig, hit_at + 2 * kT + 10s);
  ASSERT_TRUE(exited) << "survivors still running:" << job.describe();
  for (int r = 0; r < n; ++r) {
    if (r == kVictim) continue;
    const auto* fail = job.proc(r).find("fail ");
    ASSERT_NE(fail, nullptr) << job.describe();
    EXPECT_TRUE(contains(fail->text, "fail IoError") || contains(fail->text, "fail TimeoutError")) << fail->text;
    EXPECT_TRUE(contains(fail->text, "rank 2 (shm pid")) << "does not name the victim: " << fail->text;
    EXPECT_LE(fail->at - hit_at, 2 * kT) << fail->text;
    EXPECT_NE(job.proc(r).find("closed"), nullptr) << job.describe();
  }
  EXPECT_EQ(leftovers(o.job_id), std::vector<std::string>{});
}

TEST(ShmProcesses, SigkilledRankIsNamedWithin2T) { victim_mid_allreduce(SIGKILL); }
TEST(ShmProcesses, SigstoppedRankIsNamedWithin2T) { victim_mid_allreduce(SIGSTOP); }

}  // namespace
}  // namespace ringbench
