// The device link beyond plain TCP (runner/remote/): the link choice, the verbs bootstrap's frames
// and store, and the request stream over a message transport. Runs everywhere: the transport under
// the stream is the TCP transport, bootstrapped by the same PairStore over a socket pair as the
// verbs one is (remote_verbs_test runs the verbs transport itself where an RDMA device exists).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "collectives/net.h"
#include "collectives/transport/tcp/tcp_transport.h"
#include "runner/remote/channel_wire.h"
#include "runner/remote/client.h"
#include "runner/remote/device.h"
#include "runner/remote/pair_store.h"
#include "runner/remote/session.h"
#include "runner/remote/transport_channel.h"
#include "runner/remote/wire.h"
#include "tests/error_text.h"

namespace {

using namespace ringbench;
using namespace ringbench::remote;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

using ringbench::testing::error_of;

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(ChannelWire, TheLinkChoiceAndTheBootstrapFramesAreCheckedFieldByField) {
  std::string why;
  char c[kLinkChoiceBytes];
  std::memcpy(c, encode_link_choice(LinkTransport::verbs).data(), sizeof c);
  EXPECT_TRUE(decode_link_choice(c, &why) == LinkTransport::verbs);
  c[4] = 2;
  EXPECT_FALSE(decode_link_choice(c, &why));
  c[4] = 1;
  c[7] = 1;
  EXPECT_FALSE(decode_link_choice(c, &why));
  c[0] = 'H';  // a request header where the choice is due
  EXPECT_FALSE(decode_link_choice(c, &why));

  auto decoded = [&](const std::string& frame) {
    char h[kBootHeaderBytes];
    std::memcpy(h, frame.data(), sizeof h);
    return decode_boot_header(h, &why);
  };
  ASSERT_TRUE(decoded(encode(BootFrame{'S', "verbs/conn/1", std::string(124, 'x')})));
  EXPECT_EQ(decoded(encode(BootFrame{'S', "verbs/conn/1", std::string(124, 'x')}))->value, 124u);
  EXPECT_FALSE(decoded(encode(BootFrame{'Q', "verbs/conn/1", ""})));
  EXPECT_FALSE(decoded(encode(BootFrame{'S', "", "x"})));
  EXPECT_FALSE(decoded(encode(BootFrame{'S', std::string(kMaxBootKey + 1, 'k'), "x"})));
  EXPECT_FALSE(decoded(encode(BootFrame{'S', "k", std::string(kMaxBootValue + 1, 'x')})));
  EXPECT_FALSE(decoded(encode(BootFrame{'A', "k", std::string(7, '\0')})));  // a count is 8 bytes
  EXPECT_TRUE(has(why, "8 for a count")) << why;
  std::string padded = encode(BootFrame{'S', "k", "v"});
  padded[1] = 1;
  EXPECT_FALSE(decoded(padded));
  EXPECT_TRUE(valid_boot_key("verbs/ready/arrived"));
  EXPECT_FALSE(valid_boot_key("verbs/conn/1 "));
  EXPECT_FALSE(valid_boot_key("Verbs"));
}

TEST(ChannelWire, StreamDescriptorsAreCheckedFieldByField) {
  std::string why;
  char d[kStreamHeaderBytes];
  auto decoded = [&](const StreamHeader& h, uint64_t seq) {
    encode(d, h);
    return decode_stream_header(d, seq, &why);
  };
  ASSERT_TRUE(decoded({'D', 40, 17 << 20, 5}, 5));
  EXPECT_EQ(decoded({'D', 40, 17 << 20, 5}, 5)->bulk, uint64_t{17} << 20);
  EXPECT_TRUE(decoded({'B', 0, 0, 0}, 0));
  EXPECT_FALSE(decoded({'D', 40, 0, 5}, 6));  // out of order
  EXPECT_TRUE(has(why, "where 6 was due")) << why;
  EXPECT_FALSE(decoded({'D', uint32_t(kInlineBytes + 1), 0, 0}, 0));
  EXPECT_FALSE(decoded({'D', 0, kMaxBulk + 1, 0}, 0));
  EXPECT_FALSE(decoded({'D', 0, 0, 0}, 0));  // empty
  EXPECT_FALSE(decoded({'B', 1, 0, 0}, 0));  // a goodbye with data
  EXPECT_FALSE(decoded({'X', 1, 0, 0}, 0));
  encode(d, {'D', 1, 0, 0});
  d[13] = 1;  // reserved
  EXPECT_FALSE(decode_stream_header(d, 0, &why));
  encode(d, {'D', 1, 0, 0});
  d[0] = 'X';
  EXPECT_FALSE(decode_stream_header(d, 0, &why));
}

// A connected pair of non-blocking stream sockets, closed at the end.
struct SocketPair {
  int fd[2] = {-1, -1};
  SocketPair() {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd) != 0) throw Error("socketpair");
    net::set_nonblocking(fd[0]);
    net::set_nonblocking(fd[1]);
  }
  ~SocketPair() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void send(const std::string& b) const { ASSERT_EQ(::send(fd[1], b.data(), b.size(), MSG_NOSIGNAL), ssize_t(b.size())); }
};

TEST(PairStore, APeersBadFramesAreIoErrorsNamingIt) {
  const milliseconds t(2000);
  {
    SocketPair p;
    PairStore s(p.fd[0], true, "client 10.0.0.2:5", t);
    p.send(std::string("Q\0\0\1\0\0\0\0", 8));
    const std::string e = error_of([&] { s.get("verbs/conn/1", t); });
    EXPECT_TRUE(has(e, "client 10.0.0.2:5") && has(e, "unknown kind")) << e;
  }
  {
    SocketPair p;
    PairStore s(p.fd[0], true, "client 10.0.0.2:5", t);
    p.send(encode(BootFrame{'S', "VERBS/conn/1", "x"}));
    EXPECT_TRUE(has(error_of([&] { s.get("verbs/conn/1", t); }), "outside [a-z0-9/_.-]"));
  }
  {
    SocketPair p;
    PairStore s(p.fd[0], true, "client 10.0.0.2:5", t);
    p.send(encode(BootFrame{'R', "verbs/ready/arrived", std::string(8, '\0')}));  // the server is asked, never answered
    EXPECT_TRUE(has(error_of([&] { s.get("verbs/conn/1", t); }), "where none is due"));
  }
  {
    SocketPair p;
    PairStore s(p.fd[0], true, "client 10.0.0.2:5", t);
    for (int i = 0; i <= kMaxBootFrames; ++i) p.send(encode(BootFrame{'S', "k" + std::to_string(i), "x"}));
    EXPECT_TRUE(has(error_of([&] { s.get("verbs/conn/1", t); }), "more than 16 bootstrap frames"));
  }
  {
    // Two counts whose sum leaves int64 (found by remote_link_fuzz): an error, not a wrapped count.
    SocketPair p;
    PairStore s(p.fd[0], true, "client 10.0.0.2:5", t);
    const std::string big("\xff\xff\xff\xff\xff\xff\xff\x7f", 8);  // 2^63 - 1, little-endian
    p.send(encode(BootFrame{'A', "verbs/ready/arrived", big}));
    p.send(encode(BootFrame{'A', "verbs/ready/arrived", big}));
    const std::string e = error_of([&] { s.get("verbs/conn/1", t); });
    EXPECT_TRUE(has(e, "client 10.0.0.2:5") && has(e, "would overflow")) << e;
  }
  {
    SocketPair p;
    PairStore s(p.fd[0], true, "client 10.0.0.2:5", t);
    const auto t0 = Clock::now();
    try {
      s.get("verbs/conn/1", milliseconds(300));
      ADD_FAILURE() << "a silent peer was waited for without end";
    } catch (const TimeoutError& e) {
      EXPECT_TRUE(has(e.what(), "client 10.0.0.2:5")) << e.what();
    }
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
    ::shutdown(p.fd[1], SHUT_RDWR);
    EXPECT_TRUE(has(error_of([&] { s.get("verbs/conn/1", t); }), "vanished during the verbs bootstrap"));
  }
}

// What a verbs link is, with the TCP transport under it: the two ranks bootstrapped by PairStore
// over a socket pair (the authenticated connection's stand-in), and a channel on each end.
struct Link {
  SocketPair sockets;
  std::unique_ptr<TransportChannel> server, client;
  explicit Link(milliseconds timeout = milliseconds(10000)) {
    std::unique_ptr<Transport> t0, t1;
    std::exception_ptr failed[2];
    auto rank = [&](int r) {
      try {
        PairStore s(sockets.fd[r], r == 0, r == 0 ? "client test" : "device server test", timeout);
        TcpOptions o;
        o.timeout = timeout;
        o.job_id = "link-test";
        auto t = make_tcp_transport(s, r, 2, o);
        store_barrier(s, "ready", 2, timeout);  // the server keeps the count, answering the client's add
        (r == 0 ? t0 : t1) = std::move(t);
      } catch (...) {
        failed[r] = std::current_exception();
      }
    };
    std::thread server_side(rank, 0);
    rank(1);
    server_side.join();
    for (const auto& f : failed)
      if (f) std::rethrow_exception(f);
    server = std::make_unique<TransportChannel>(std::move(t0), sockets.fd[0], "client test", false, timeout);
    client = std::make_unique<TransportChannel>(std::move(t1), sockets.fd[1], "device server test", true, timeout);
  }
  // Both ends at once, as two processes would: a TCP transport's close waits for the peer's.
  ~Link() { close_both(); }
  void close_both() {
    std::thread other([this] { server.reset(); });
    client.reset();
    other.join();
  }
};

// Bytes unique per (message, index).
std::string message(size_t m, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = char((i * 131 + m * 7919 + i / 251) & 0xff);
  return s;
}

TEST(TransportChannel, TheStreamArrivesWholeWhateverThePieces) {
  Link l;
  // Around the inline limit, a segment and several; some messages in two writes.
  const std::vector<size_t> sizes = {1,    16,   kInlineBytes - 1, kInlineBytes, kInlineBytes + 1, 5000,
                                     kSegmentBytes - 1, kSegmentBytes, kSegmentBytes + 1, 3 * kSegmentBytes + 77,
                                     (size_t(3) << 20) + 5};
  std::string all;
  for (size_t m = 0; m < sizes.size(); ++m) all += message(m, sizes[m]);
  std::string got(all.size(), '\0');
  std::thread reader([&] {
    size_t at = 0, piece = 3;
    while (at < got.size()) {
      const size_t n = std::min(piece, got.size() - at);
      l.server->read(got.data() + at, n, milliseconds(10000));
      at += n;
      piece = piece * 5 % 70001 + 1;  // pieces that straddle every boundary
    }
    char end;
    EXPECT_FALSE(l.server->read(&end, 1, milliseconds(10000), true));  // then the goodbye, and nothing else
    l.server.reset();
  });
  for (size_t m = 0; m < sizes.size(); ++m) {
    const std::string b = message(m, sizes[m]);
    const size_t half = m % 2 ? b.size() / 2 : 0;
    if (half) l.client->write(b.data(), half, milliseconds(10000));
    l.client->write(b.data() + half, b.size() - half, milliseconds(10000));
    if (m % 3 != 2) l.client->flush(milliseconds(10000));  // every third message gathers with the next
  }
  l.client->flush(milliseconds(10000));
  l.client.reset();
  reader.join();
  EXPECT_TRUE(got == all) << "the stream arrived changed";
}

TEST(TransportChannel, AGoodbyeEndsTheStreamAtABoundaryOnly) {
  {
    Link l;
    l.client->write("0123456789", 10, milliseconds(1000));
    l.client->flush(milliseconds(1000));
    char b[16];
    ASSERT_TRUE(l.server->read(b, 10, milliseconds(5000), true));
    std::thread gone([&] { l.client.reset(); });  // says goodbye
    EXPECT_FALSE(l.server->read(b, 16, milliseconds(5000), true));
    l.server.reset();
    gone.join();
  }
  {
    Link l;
    l.client->write("01234567", 8, milliseconds(1000));
    std::thread gone([&] { l.client.reset(); });  // half a header, then goodbye
    char b[16];
    const std::string e = error_of([&] { l.server->read(b, 16, milliseconds(5000), true); });
    EXPECT_TRUE(has(e, "client test closed the link in the middle of a message")) << e;
    l.server.reset();
    gone.join();
  }
}

TEST(TransportChannel, APeerWhoseProcessIsGoneIsAnIoErrorAtOnce) {
  Link l(milliseconds(2000));
  ::shutdown(l.sockets.fd[1], SHUT_RDWR);  // as the kernel closes a killed process's socket
  char b[16];
  const auto t0 = Clock::now();
  try {
    l.server->read(b, 16, milliseconds(20000), true);
    ADD_FAILURE() << "read past a vanished peer";
  } catch (const TimeoutError& e) {
    ADD_FAILURE() << "waited for the timeout: " << e.what();
  } catch (const IoError& e) {
    EXPECT_TRUE(has(e.what(), "client test vanished: its process is gone")) << e.what();
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));  // not the 20 s of the read's timeout
}

TEST(TransportChannel, ASilentPeerIsATimeoutNamingIt) {
  Link l;
  char b[16];
  try {
    l.server->read(b, 16, milliseconds(300), true);
    ADD_FAILURE() << "read from a silent peer";
  } catch (const TimeoutError& e) {
    EXPECT_TRUE(has(e.what(), "client test sent nothing")) << e.what();
  }
}

// A request as RemoteDevice::call sends it, over any channel.
void call(Channel& c, Op op, uint32_t handle, const std::string& head, const std::string& data, const ReplyTo& to) {
  char h[kHeaderBytes];
  encode_request(h, {op, handle, head.size() + data.size()});
  c.write(h, sizeof h, milliseconds(10000));
  c.write(head.data(), head.size(), milliseconds(10000));
  if (!data.empty()) c.write(data.data(), data.size(), milliseconds(10000));
  c.flush(milliseconds(10000));
  uint64_t received = 0;
  receive_reply(c, milliseconds(10000), "device server test", op, to, &received);
}

std::string u64(uint64_t v) {
  std::string s;
  put_u64(s, v);
  return s;
}

// The device server's session over the stream: hello, a buffer written and read back across
// segments, the end of the client's requests.
TEST(TransportChannel, ASessionServesItsRequestsOverAMessageTransport) {
  DeviceConfig dc;
  dc.backend = "reference";
  dc.memory_bytes = uint64_t{64} << 20;
  Device device(dc);
  Link l;
  std::string served;
  std::thread server([&] {
    try {
      Session s(device, *l.server);
      served = s.serve();
    } catch (const std::exception& e) {
      served = std::string("failed: ") + e.what();
    }
  });
  double fraction = 0.5;
  uint64_t bits = 0;
  std::memcpy(&bits, &fraction, 8);
  std::string answer;
  call(*l.client, Op::hello, 0, u64(bits), "", {.out = &answer});
  EXPECT_TRUE(has(answer, "\"emulated\"")) << answer;
  const size_t n = 700001;
  char id[4];
  call(*l.client, Op::alloc, 0, u64(n + 3), "", {.into = id, .into_len = 4});
  const std::string data = message(1, n);
  call(*l.client, Op::write, get_u32(id), u64(3), data, {});
  std::string back(n, '\0');
  call(*l.client, Op::read, get_u32(id), u64(3) + u64(n), "", {.into = back.data(), .into_len = n});
  EXPECT_TRUE(back == data);
  call(*l.client, Op::free_buffer, get_u32(id), "", "", {});
  std::thread gone([&] { l.client.reset(); });  // goodbye: the session ends between requests
  server.join();
  l.server.reset();
  gone.join();
  EXPECT_TRUE(has(served, "client test left after 5 request(s)")) << served;
}

}  // namespace
