// The transport contract on the TCP transport, with threads as ranks: ordering, striping over
// several sockets, zero-length and unexpected messages, tag/length mismatches, bounds, abort,
// and timeouts that name the peer.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/errors.h"
#include "collectives/net.h"
#include "collectives/transport/tcp/tcp_internal.h"
#include "tests/descriptors_exhausted.h"
#include "tests/rank_threads.h"
#include "tests/transport_contract.h"

namespace ringbench {
namespace {

using namespace std::chrono_literals;
using testing::run_ranks;

TcpOptions opts(int sockets = 2, std::chrono::milliseconds timeout = 5000ms) {
  TcpOptions o;
  o.sockets_per_peer = sockets;
  o.timeout = timeout;
  return o;
}

// run_ranks with the default options, as the contract checks run ranks.
void tcp_ranks(int n, const std::function<void(Transport&)>& body) { run_ranks(n, body); }

TEST(TcpTransport, DeclaresHostMemoryAndPath) {
  run_ranks(2, [](Transport& t) {
    testing::expect_host_memory_only(t, "tcp");
    auto p = t.path_info();
    EXPECT_EQ(p["iface"], "lo");
    EXPECT_EQ(p["addr"].rfind("127.0.0.1:", 0), 0u);
    EXPECT_FALSE(t.caps().recv_sink);
    EXPECT_THROW(t.irecv_sink(1 - t.rank(), 4, 1, [](const char*, size_t) {}), Error);
    EXPECT_FALSE(t.caps().forward);
    std::vector<char> home(4);
    auto hb = t.register_buffer(home.data(), home.size());
    EXPECT_THROW(t.irecv_forward(1 - t.rank(), 1 - t.rank(), 4, 1, *hb, 0, [](const char*, size_t, size_t, char*) {}), Error);
  });
}

// Many messages of varied sizes in both directions arrive in posting order, over 1 and 3
// sockets per peer, with receives posted late (after the data arrived) for half of them.
TEST(TcpTransport, OrderedStripedAndUnexpected) {
  for (int sockets : {1, 3}) {
    run_ranks(2, [&](Transport& t) {
      const int peer = 1 - t.rank();
      const int msgs = 64;
      testing::Numbered v(t, 1 << 16);
      std::vector<std::unique_ptr<Request>> reqs;
      size_t off = 0;
      std::vector<std::pair<size_t, size_t>> ranges;
      for (int i = 0; i < msgs; ++i) {
        size_t len = (i * 37 % 9) * 100;  // includes zero-length messages
        ranges.push_back({off, len});
        reqs.push_back(t.isend(peer, *v.sb, off * 4, len * 4, static_cast<uint64_t>(i)));
        off += len;
      }
      std::this_thread::sleep_for(50ms);  // let the data arrive before the receives exist
      for (int i = 0; i < msgs; ++i)
        reqs.push_back(t.irecv(peer, *v.db, ranges[i].first * 4, ranges[i].second * 4,
                               static_cast<uint64_t>(i)));
      for (auto& r : reqs) r->wait(5s);
      ASSERT_TRUE(v.received_from(peer, off));
    }, opts(sockets));
  }
}

TEST(TcpTransport, TestPollsToCompletion) { testing::contract::test_polls_to_completion(tcp_ranks); }
TEST(TcpTransport, OutOfBoundsAndBadPeerAreErrors) { testing::contract::out_of_bounds_and_bad_peer_are_errors(tcp_ranks); }
TEST(TcpTransport, MismatchFailsBothSides) { testing::contract::mismatch_fails_both_sides(tcp_ranks); }
TEST(TcpTransport, WaitTimesOutNamingAlivePeer) { testing::contract::wait_times_out_naming_alive_peer(tcp_ranks, 2s); }

// A client that connects to a rank's port and never says anything must not hold up the real
// peers: handshakes are read concurrently, so setup finishes long before the 5 s grace.
TEST(TcpTransport, SilentStrayDoesNotDelaySetup) {
  InProcStore store;
  std::unique_ptr<Transport> t0, t1;
  std::thread rank0([&] { t0 = make_tcp_transport(store, 0, 2, opts(2, 10000ms)); });
  auto [host, port] = parse_host_port(store.get("tcp/addr/0", 5000ms));
  int stray = net::connect_tcp(host, port, std::chrono::steady_clock::now() + 2s);
  auto t_start = std::chrono::steady_clock::now();
  std::thread rank1([&] { t1 = make_tcp_transport(store, 1, 2, opts(2, 10000ms)); });
  rank1.join();
  rank0.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t_start, 2s);
  ::close(stray);
  ASSERT_TRUE(t0 && t1);
  int x = 42, y = 0;
  auto xb = t0->register_buffer(&x, sizeof x);
  auto yb = t1->register_buffer(&y, sizeof y);
  {
    auto s = t0->isend(1, *xb, 0, sizeof x, 1);  // requests go before their transport
    t1->irecv(0, *yb, 0, sizeof y, 1)->wait(5s);
    s->wait(5s);
  }
  EXPECT_EQ(y, 42);
  std::thread close0([&] { t0.reset(); });
  t1.reset();
  close0.join();
}

// Rank 0 of two, already accepting (rank 1's address is set beforehand, so it does not wait in
// the store for it) before rank 1 exists; finish() starts rank 1 and checks both got connected.
struct RankZeroAcceptingAlone {
  InProcStore store;
  std::unique_ptr<Transport> t0, t1;
  std::thread rank0;
  int port = 0;
  RankZeroAcceptingAlone() {
    store.set("tcp/addr/1", "127.0.0.1:1");  // rank 1 overwrites it
    rank0 = std::thread([this] { t0 = make_tcp_transport(store, 0, 2, opts(1, 20000ms)); });
    port = parse_host_port(store.get("tcp/addr/0", 5000ms)).second;
  }
  std::chrono::steady_clock::duration finish() {
    const auto start = std::chrono::steady_clock::now();
    std::thread rank1([this] { t1 = make_tcp_transport(store, 1, 2, opts(1, 20000ms)); });
    rank1.join();
    rank0.join();
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_TRUE(t0 && t1);
    std::thread close0([this] { t0.reset(); });
    t1.reset();
    close0.join();
    return took;
  }
};

// Out of descriptors, a rank cannot accept its waiting peer, whose connection keeps the listening
// socket readable: it backs off instead of spinning on it (a spin takes a whole CPU, ~1 s of CPU
// time in this 1 s), and accepts the peer once descriptors are free again.
TEST(TcpTransport, OutOfDescriptorsSetupBacksOffAndRecovers) {
  RankZeroAcceptingAlone ranks;
  auto [early, cpu] = testing::cpu_while_a_connection_waits_unaccepted(ranks.port, 1000ms);
  EXPECT_LT(cpu, 0.5) << "rank 0 spun while out of descriptors";
  ::close(early);  // a stray to rank 0: rejected once accepted
  ranks.finish();
}

// A crowd of silent strays larger than the cap on waiting handshakes: the oldest give way to the
// newest at once (they see the connection closed long before their 5 s grace), so the crowd
// holds at most the cap's descriptors, and the real peer still gets in.
TEST(TcpTransport, ACrowdOfSilentStraysIsCappedAndDoesNotKeepThePeerOut) {
  RankZeroAcceptingAlone ranks;
  const size_t crowd = tcp_detail::kMaxPendingHandshakes + 16;
  std::vector<int> strays;
  for (size_t i = 0; i < crowd; ++i)
    strays.push_back(net::connect_tcp("127.0.0.1", ranks.port, std::chrono::steady_clock::now() + 2s));
  // Each stray gets rank 0's 40-byte challenge; the dropped ones then see the end of the stream.
  std::vector<bool> ended(crowd, false);
  int closed = 0;
  for (int i = 0; i < 200 && closed < 16; ++i) {
    std::this_thread::sleep_for(10ms);
    for (size_t k = 0; k < crowd; ++k) {
      char buf[64];
      ssize_t r;
      while ((r = ::recv(strays[k], buf, sizeof buf, MSG_DONTWAIT)) > 0) {
      }
      const bool gone = r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);  // an end or a reset
      if (gone && !ended[k]) ended[k] = true, ++closed;
    }
  }
  EXPECT_TRUE(ended[0]) << "the oldest stray was not the one dropped";
  EXPECT_EQ(closed, 16) << "strays beyond the cap were not dropped at once";
  EXPECT_LT(ranks.finish(), 3s);
  for (int fd : strays) ::close(fd);
}

}  // namespace
}  // namespace ringbench
