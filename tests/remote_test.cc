// The device server (runner/remote/): its wire checks, that a stranger gets nothing, that a client
// can neither read another's memory nor pass its cap, that a vanished client frees its place, and
// that a model on a remote device trains and infers bit for bit as on the same backend here.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/device_memory.h"
#include "base/errors.h"
#include "collectives/auth.h"
#include "collectives/net.h"
#include "models/data.h"
#include "models/network.h"
#include "models/trainer.h"
#include "models/zoo.h"
#include "runner/remote/client.h"
#include "runner/remote/remote_network.h"
#include "runner/remote/server.h"
#include "runner/remote/shaper.h"
#include "runner/remote/wire.h"
#include "tests/descriptors_exhausted.h"
#include "tests/served_device.h"

namespace {

using namespace ringbench;
using namespace ringbench::remote;
using std::chrono::milliseconds;

const std::string kSecret(auth::kSecretBytes, 'k');

// 10 s: the reference backend's steps on a loaded 2-core machine.
struct Served : ringbench::testing::ServedDevice {
  explicit Served(uint64_t memory = uint64_t{64} << 20, std::string backend = models::available_backends().front())
      : ServedDevice(memory, milliseconds(10000), kSecret, LinkTransport::tcp, std::move(backend)) {}
};

std::string u64(uint64_t v) {
  std::string s;
  put_u64(s, v);
  return s;
}

uint32_t alloc(RemoteDevice& d, uint64_t bytes) {
  char id[4];
  d.call(Op::alloc, 0, u64(bytes), nullptr, 0, {.into = id, .into_len = 4});
  return get_u32(id);
}

std::vector<char> read(RemoteDevice& d, uint32_t buffer, uint64_t n) {
  std::vector<char> out(n);
  d.call(Op::read, buffer, u64(0) + u64(n), nullptr, 0, {.into = out.data(), .into_len = n});
  return out;
}

TEST(RemoteWire, HeadersAndSpecsAreCheckedFieldByField) {
  char h[kHeaderBytes];
  encode_request(h, {Op::write, 7, 100});
  std::string why;
  ASSERT_TRUE(decode_request(h, &why));
  h[0] = 'Z';
  EXPECT_FALSE(decode_request(h, &why));
  EXPECT_NE(why.find("unknown operation"), std::string::npos);
  encode_request(h, {Op::write, 7, kMaxPayload + 1});
  EXPECT_FALSE(decode_request(h, &why));
  encode_request(h, {Op::read, 1, 16});
  h[2] = 1;
  EXPECT_FALSE(decode_request(h, &why));
  NetworkSpec s{"lenet", 4, 0, 0, false, false, 0};
  EXPECT_TRUE(decode_network_spec(encode(s), &why));
  s.model = "rm -rf /";
  EXPECT_FALSE(decode_network_spec(encode(s), &why));
  EXPECT_NE(why.find("no such model"), std::string::npos);
  s = {"lenet", 0, 0, 0, false, false, 0};
  EXPECT_FALSE(decode_network_spec(encode(s), &why));
  EXPECT_FALSE(decode_network_spec(encode(s).substr(1), &why));
}

// A server's replies as bytes in memory.
class ReplyBytes final : public Channel {
 public:
  explicit ReplyBytes(std::string s) : s_(std::move(s)) {}
  bool read(void* p, size_t n, Millis, bool) override {
    if (n > s_.size() - at_) throw IoError(-1, "the replies ended");
    std::memcpy(p, s_.data() + at_, n);
    at_ += n;
    return true;
  }
  void write(const void*, size_t, Millis) override {}
  std::string peer() const override { return "memory"; }

 private:
  std::string s_;
  size_t at_ = 0;
};

std::string reply_bytes(char kind, const std::string& payload) {
  char h[kHeaderBytes];
  encode_reply(h, {kind, payload.size()});
  return std::string(h, sizeof h) + payload;
}

// A server cannot keep a backward going: the client takes each node's gradients once.
TEST(RemoteWire, AClientTakesEachNodesGradientsOnce) {
  const models::Graph g = models::build_model("lenet", {0, 0, false, -1});
  std::vector<float> grads(g.param_count);
  int node = 0;
  while (g.nodes[size_t(node)].params.empty()) ++node;
  GradChunk c{uint32_t(node), SIZE_MAX, 0};
  for (int p : g.nodes[size_t(node)].params) {
    c.offset = std::min(c.offset, uint64_t(g.params[size_t(p)].offset));
    c.count = std::max(c.count, uint64_t(g.params[size_t(p)].offset + g.params[size_t(p)].numel));
  }
  c.count -= c.offset;
  const std::string chunk = reply_bytes('P', encode(c) + std::string(c.count * 4, '\0'));
  int done = 0;
  const ChunkSink sink{[&](const GradChunk& x) { return grad_chunk_destination(g, grads.data(), x, "server"); },
                       [&](const GradChunk&) { ++done; }, nodes_with_params(g)};
  uint64_t received = 0;
  ReplyBytes once(chunk + reply_bytes('O', ""));
  receive_reply(once, Millis(1000), "server", Op::backward, {.chunks = &sink}, &received);
  EXPECT_EQ(done, 1);
  ReplyBytes twice(chunk + chunk + reply_bytes('O', ""));
  try {
    receive_reply(twice, Millis(1000), "server", Op::backward, {.chunks = &sink}, &received);
    ADD_FAILURE() << "a node's gradients were taken twice";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("gradients again"), std::string::npos) << e.what();
  }
  EXPECT_EQ(done, 2);
}

TEST(RemoteServer, AGpuBackendIsRefusedForItWouldGetHostBuffers) {
  DeviceConfig c;
  c.backend = "cudnn";
  c.emulated = false;
  try {
    Device d(c);
    ADD_FAILURE() << "a GPU backend was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("host memory only"), std::string::npos) << e.what();
  }
}

TEST(RemoteServer, AClientWithoutTheSecretGetsNothing) {
  Served s;
  EXPECT_THROW(RemoteDevice(s.spec(), std::string(auth::kSecretBytes, 'x'), milliseconds(5000)), IoError);
  // By hand: a well-formed hello with a wrong MAC, then a request: the server closes unanswered.
  const auto deadline = net::Clock::now() + std::chrono::seconds(5);
  std::string why;
  const int fd = net::try_connect("127.0.0.1", s.server.port(), deadline, &why);
  ASSERT_GE(fd, 0) << why;
  std::string challenge(8 + auth::kNonceBytes, '\0');
  ASSERT_TRUE(net::read_all(fd, challenge.data(), challenge.size(), deadline));
  std::string hello = std::string(kMagic, 8) + std::string(auth::kNonceBytes, 'n') + std::string(auth::kMacBytes, 'm');
  char req[kHeaderBytes];
  encode_request(req, {Op::hello, 0, 8});
  hello += std::string(req, sizeof req) + u64(0);
  ASSERT_TRUE(net::write_all(fd, hello.data(), hello.size(), deadline));
  char byte;
  int err = 0;
  EXPECT_EQ(net::recv_all(fd, &byte, 1, deadline, &err), net::IoStatus::closed);
  int fd2 = fd;
  net::close_fd(fd2);
  for (int i = 0; i < 100 && s.server.refused() < 2; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(s.server.refused(), 2);
}

// Connections that have not proved the secret have a small cap of their own: strangers are
// refused at once past it (not after their 5 s), a client keeps its session throughout, and the
// threads of ended connections are joined.
TEST(RemoteServer, StrangersGetASmallCapAndTheirThreadsAreJoined) {
  Served s;
  RemoteDevice a(s.spec(0.5), kSecret, milliseconds(5000));
  const uint32_t mine = alloc(a, 64);
  std::vector<int> strangers;
  for (int i = 0; i < 12; ++i) {
    std::string why;
    strangers.push_back(net::try_connect("127.0.0.1", s.server.port(), net::Clock::now() + std::chrono::seconds(5), &why));
    ASSERT_GE(strangers.back(), 0) << why;
  }
  for (int i = 0; i < 300 && s.server.refused() < 4; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(s.server.refused(), 4);  // 12 strangers, 8 pending places
  EXPECT_EQ(read(a, mine, 64), std::vector<char>(64, 0));  // the client is served meanwhile
  for (int& fd : strangers) net::close_fd(fd);
  for (int i = 0; i < 300 && s.server.threads_held() > 1; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(s.server.threads_held(), 1u);  // a's
  EXPECT_EQ(s.server.refused(), 12);
}

// Strangers, however many and from however few addresses, cannot keep a new client out: the
// oldest waiting stranger gives way to each new connection, and a client proves the secret
// within a round trip, long before 8 newer strangers arrive.
TEST(RemoteServer, StrangersGiveWayToANewClient) {
  Served s;
  std::vector<int> strangers;
  for (int i = 0; i < 8; ++i) {
    std::string why;
    strangers.push_back(net::try_connect("127.0.0.1", s.server.port(), net::Clock::now() + std::chrono::seconds(5), &why));
    ASSERT_GE(strangers.back(), 0) << why;
  }
  std::this_thread::sleep_for(milliseconds(100));  // all 8 pending places taken
  const auto t0 = std::chrono::steady_clock::now();
  RemoteDevice b(s.spec(0.5), kSecret, milliseconds(5000));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));  // not after a stranger's 5 s
  EXPECT_EQ(read(b, alloc(b, 16), 16), std::vector<char>(16, 0));
  // The oldest stranger, at once: its worker counts it when its read fails, on its own thread.
  for (int i = 0; i < 200 && s.server.refused() < 1; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_GE(s.server.refused(), 1);
  for (int& fd : strangers) net::close_fd(fd);
}

// Out of descriptors, the server cannot accept a waiting client, which keeps its listening socket
// readable: it backs off instead of spinning on it, says so once, and serves the client once
// descriptors are free again.
TEST(RemoteServer, OutOfDescriptorsItBacksOffAndRecovers) {
  Served s;
  auto [early, cpu] = ringbench::testing::cpu_while_a_connection_waits_unaccepted(s.server.port(), milliseconds(1000));
  EXPECT_LT(cpu, 0.5) << "the server spun while out of descriptors";
  ::close(early);
  RemoteDevice b(s.spec(), kSecret, milliseconds(5000));
  EXPECT_EQ(read(b, alloc(b, 16), 16), std::vector<char>(16, 0));
  EXPECT_NE(s.logged().find("cannot accept a connection"), std::string::npos) << s.logged();
}

TEST(RemoteServer, AClientCannotReadAnothersMemoryNorPassItsCap) {
  Served s(uint64_t{64} << 20);  // 64 MiB: 32 MiB each
  RemoteDevice a(s.spec(0.5), kSecret, milliseconds(5000));
  EXPECT_TRUE(a.device()["emulated"].get<bool>());
  EXPECT_EQ(a.device()["cap_bytes"].get<uint64_t>(), uint64_t{32} << 20);
  const uint32_t mine = alloc(a, 4096);
  const std::string secret_data(4096, 'S');
  a.call(Op::write, mine, u64(0), secret_data.data(), secret_data.size());
  EXPECT_EQ(std::string(read(a, mine, 4096).data(), 4096), secret_data);
  // b's errors end its session; the next b waits until the server has given its half back.
  auto b_left = [&] {
    for (int i = 0; i < 500 && s.device.promised() > 0.5; ++i) std::this_thread::sleep_for(milliseconds(10));
  };
  {
    RemoteDevice b(s.spec(0.5), kSecret, milliseconds(5000));
    EXPECT_THROW(read(b, mine, 4096), Error);  // a's handle names nothing of b's
  }
  b_left();
  {  // another client fills a buffer with a pattern, frees it and leaves
    RemoteDevice c(s.spec(0.5), kSecret, milliseconds(5000));
    const uint32_t gone = alloc(c, 4096);
    const std::string pattern(4096, 'P');
    c.call(Op::write, gone, u64(0), pattern.data(), pattern.size());
    EXPECT_EQ(std::string(read(c, gone, 4096).data(), 4096), pattern);
    c.call(Op::free_buffer, gone, "", nullptr, 0);
  }
  b_left();
  {
    RemoteDevice b(s.spec(0.5), kSecret, milliseconds(5000));
    const uint32_t fresh = alloc(b, 4096);  // new memory (likely the freed block) shows nothing of anyone's
    EXPECT_EQ(read(b, fresh, 4096), std::vector<char>(4096, 0));
    EXPECT_THROW(read(b, fresh, 4097), Error);  // past its end
  }
  b_left();
  {
    RemoteDevice b(s.spec(0.5), kSecret, milliseconds(5000));
    alloc(b, uint64_t{30} << 20);
    try {
      alloc(b, uint64_t{4} << 20);  // 34 MiB > 32 MiB
      ADD_FAILURE() << "over the cap";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("over this client's cap"), std::string::npos) << e.what();
    }
  }
  b_left();
  // a holds half; asking for more than the other half is refused at hello.
  EXPECT_THROW(RemoteDevice(s.spec(0.75), kSecret, milliseconds(5000)), Error);
  EXPECT_EQ(std::string(read(a, mine, 4096).data(), 4096), secret_data);  // a is untouched throughout
}

// A network's build is measured on its own thread, whatever other clients allocate or free
// meanwhile, and refused as it passes its limit.
TEST(RemoteServer, ABuildsMemoryIsCountedOnItsThreadAlone) {
  auto* others = new DeviceBuffer(1 << 20, "another client's buffer");
  {
    DeviceMemoryScope build(1 << 16);
    DeviceBuffer mine(4096, "the build's");
    std::thread([&] {  // another client frees a buffer and makes a bigger one meanwhile
      delete others;
      DeviceBuffer bigger(2 << 20, "another client's new buffer");
    }).join();
    EXPECT_EQ(build.bytes(), 4096u);
    EXPECT_THROW(DeviceBuffer(1 << 16, "past the build's limit"), DeviceOutOfMemory);
    EXPECT_EQ(build.bytes(), 4096u);
  }
}

// A build that would pass the client's cap stops there: the server never holds more for it.
TEST(RemoteServer, ABuildPastTheCapIsRefusedBeforeItIsMade) {
  models::set_compute_threads(1);
  const models::Graph g = models::build_model("lenet", {0, 0, false, -1});
  const int batch = 16;
  uint64_t largest = 0;
  for (const models::Node& n : g.nodes) largest = std::max(largest, uint64_t(n.out.numel()));
  // Room for the buffers and the largest layer's outputs (the server's lower bound), not for
  // the build's ping-pong activations and reordered weights.
  const uint64_t cap = (g.param_count + g.state_count + batch * largest) * 4 + 4096;
  Served s(cap);
  DeviceMemory& dm = DeviceMemory::instance();
  const size_t base = dm.in_use();
  dm.reset_peak();
  auto dev = std::make_shared<RemoteDevice>(s.spec(), kSecret, milliseconds(5000));
  try {
    open_remote_network(dev, g, batch, {.inference_only = true}, 0, 0, false);
    ADD_FAILURE() << "a build past the cap was served";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("over this client's cap"), std::string::npos) << e.what();
  }
  EXPECT_LE(dm.peak() - base, cap) << "the server held more than the client's cap while building";
}

// A request's copy of a batch counts against the device's memory (and the client's cap) while
// the server holds it.
TEST(RemoteServer, ABatchsCopyIsCharged) {
  models::set_compute_threads(1);
  Served s(uint64_t{256} << 20);
  const models::Graph g = models::build_model("lenet", {0, 0, false, -1});
  const int batch = 16;
  auto dev = std::make_shared<RemoteDevice>(s.spec(), kSecret, milliseconds(5000));
  auto net = open_remote_network(dev, g, batch, {.inference_only = true}, 0, 0, false);
  DeviceMemory& dm = DeviceMemory::instance();
  const size_t base = dm.in_use();
  dm.reset_peak();
  const std::vector<float> x(size_t(batch) * g.input_dims().numel(), 0.5f);
  net->set_input(x.data());
  EXPECT_GE(dm.peak() - base, x.size() * 4);
  EXPECT_EQ(dm.in_use(), base);  // and given back after
}

TEST(RemoteServer, AVanishedClientIsLoggedAndItsPlaceFreed) {
  Served s;
  {
    RemoteDevice a(s.spec(1.0), kSecret, milliseconds(5000));
    alloc(a, 1 << 20);
  }  // gone without a word (the socket closes)
  // Once the server has seen it go and given its seat back (a's session ends a moment after).
  for (int i = 0; i < 500 && (s.logged().find("left") == std::string::npos || s.device.promised() > 0); ++i)
    std::this_thread::sleep_for(milliseconds(10));
  EXPECT_NE(s.logged().find("left after 2 request(s), holding at most 1.0 MiB; freed its 1.0 MiB"), std::string::npos) << s.logged();
  RemoteDevice b(s.spec(1.0), kSecret, milliseconds(5000));  // the whole device is free again
}

// Steps of the same model on a backend here and on the same backend behind the server.
struct Run {
  std::vector<float> params, state;
  std::vector<double> losses;
};

Run train(models::Network& net, int steps) {
  models::TrainOptions o;
  o.sgd = {0.01f, 0.9f, 1e-4f};
  models::Trainer t(net, o, {});
  auto data = models::make_synthetic_source(net.graph().input_dims(), net.graph().output_node().out.c, net.batch(), 7, 0);
  Run r;
  for (int i = 0; i < steps; ++i) r.losses.push_back(t.step(*data).loss);
  if (auto* rn = dynamic_cast<RemoteNetwork*>(&net)) rn->pull_state();
  r.params = t.host_params();
  r.state = t.host_state();
  return r;
}

void trains_bit_identically(const std::string& model, int image_size, int batch) {
  models::set_compute_threads(1);
  Served s(uint64_t{1} << 30);
  const models::Graph g = models::build_model(model, {0, image_size, false, -1});
  auto local = models::make_network(s.device.config().backend, g, batch);
  const Run here = train(*local, 3);
  auto dev = std::make_shared<RemoteDevice>(s.spec(), kSecret, milliseconds(10000));
  auto remote_net = open_remote_network(dev, g, batch, {}, 0, image_size, false);
  const Run there = train(*remote_net, 3);
  EXPECT_EQ(here.losses, there.losses);
  ASSERT_EQ(here.params.size(), there.params.size());
  size_t differ = 0;
  for (size_t i = 0; i < here.params.size(); ++i) differ += std::memcmp(&here.params[i], &there.params[i], 4) != 0;
  EXPECT_EQ(differ, 0u) << model << ": parameters differ";
  EXPECT_TRUE(here.state == there.state) << model << ": batch-norm statistics differ";
  const Traffic step = remote_net->step_traffic();
  EXPECT_GT(step.sent, g.param_count * 4);      // the update's parameters, the batch, the logits' gradients
  EXPECT_GT(step.received, g.param_count * 4);  // every gradient
  EXPECT_EQ(step.round_trips, 5u);  // parameters, forward, logits, their gradients, backward
}

TEST(RemoteTraining, LenetTrainsBitIdenticallyToLocal) { trains_bit_identically("lenet", 0, 4); }
TEST(RemoteTraining, MobilenetTrainsBitIdenticallyToLocal) { trains_bit_identically("mobilenet_v1", 32, 2); }

TEST(RemoteInference, OutputsEqualLocal) {
  models::set_compute_threads(1);
  Served s(uint64_t{1} << 30);
  const models::Graph g = models::build_model("mobilenet_v1", {0, 32, false, -1});
  const int batch = 2;
  std::vector<float> params(g.param_count), state(g.state_count), x(size_t(batch) * g.input_dims().numel());
  models::init_params(g, 3, params.data(), state.data());
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 17) - 8) / 8.0f;
  auto infer = [&](models::Network& net) {
    net.bind(params.data(), nullptr, state.data());
    net.set_input(x.data());
    net.forward({.training = false});
    std::vector<float> y(size_t(batch) * g.output_node().out.numel());
    net.get_output(0, y.data());
    return y;
  };
  auto local = models::make_network(s.device.config().backend, g, batch, {.inference_only = true});
  auto dev = std::make_shared<RemoteDevice>(s.spec(), kSecret, milliseconds(10000));
  auto remote_net = open_remote_network(dev, g, batch, {.inference_only = true}, 0, 32, false);
  EXPECT_TRUE(infer(*local) == infer(*remote_net));
  EXPECT_THROW(remote_net->backward(), Error);
}

// The shaping proxy delays every round trip by at least twice its one-way latency plus the time
// its rate takes for the bytes, each way (lower bounds only: a loaded host may add, never take).
TEST(RemoteLink, TheShapingProxyAddsItsLatencyAndRate) {
  Served s;
  remote::ShapingProxy link("127.0.0.1", 0, "127.0.0.1", s.server.port(), {std::chrono::microseconds(3000), 0.1e9});
  const auto t0 = std::chrono::steady_clock::now();
  RemoteDevice d({"127.0.0.1", link.port(), 1.0}, kSecret, milliseconds(10000));  // handshake + hello: 3 one-way trips
  const uint32_t b = alloc(d, 1 << 20);
  const auto t1 = std::chrono::steady_clock::now();
  const std::vector<char> mb(1 << 20, 'x');
  d.call(Op::write, b, u64(0), mb.data(), mb.size());  // 1 MiB at 100 Mbit/s: 84 ms one way
  const auto t2 = std::chrono::steady_clock::now();
  using Micros = std::chrono::duration<double, std::micro>;
  const double us = Micros(t1 - t0).count(), write_us = Micros(t2 - t1).count();
  EXPECT_GE(us, 7 * 3000.0);  // the handshake (3 one-way trips), hello and alloc (2 round trips)
  EXPECT_GE(write_us, 6000 + (1 << 20) * 8 / 0.1e3);
  EXPECT_LT(us, 5e6);
}

// Echoes what its one connection sends until it closes: the far end of a ping-pong.
struct Echo {
  int listen_fd = net::listen_host("127.0.0.1", 0);
  int port = net::bound_port(listen_fd);
  std::thread t{[this] {
    const int fd = ::accept(listen_fd, nullptr, nullptr);
    if (fd < 0) return;
    net::set_nodelay(fd);
    std::vector<char> b(1 << 16);
    for (ssize_t n; (n = ::recv(fd, b.data(), b.size(), 0)) > 0;)
      if (::send(fd, b.data(), size_t(n), MSG_NOSIGNAL) != n) break;
    ::close(fd);
  }};
  ~Echo() {
    ::shutdown(listen_fd, SHUT_RDWR);
    t.join();
    ::close(listen_fd);
  }
};

// A ping-pong of 64 bytes through the proxy at 2 ms one way: the median round trip is the
// claimed 4 ms plus at most a generous 20 ms for a loaded host (bench/link_pingpong measures it
// closely: results/remote-gpu-sweep-20261129/pingpong.md).
TEST(RemoteLink, APingPongTakesTheClaimedLatencyWithinABound) {
  Echo echo;
  remote::ShapingProxy link("127.0.0.1", 0, "127.0.0.1", echo.port, {std::chrono::microseconds(2000), 0});
  std::string why;
  int fd = net::try_connect("127.0.0.1", link.port(), net::Clock::now() + std::chrono::seconds(5), &why);
  ASSERT_GE(fd, 0) << why;
  net::set_nodelay(fd);
  std::vector<char> out(64, 'p'), in(64);
  std::vector<double> us;
  for (int i = 0; i < 25; ++i) {
    const auto t0 = std::chrono::steady_clock::now(), deadline = t0 + std::chrono::seconds(10);
    ASSERT_TRUE(net::write_all(fd, out.data(), out.size(), deadline));
    ASSERT_TRUE(net::read_all(fd, in.data(), in.size(), deadline));
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  net::close_fd(fd);
  std::sort(us.begin(), us.end());
  EXPECT_GE(us.front(), 4000.0);        // never less than the claim
  EXPECT_LE(us[us.size() / 2], 24000.0);  // the median: the claim, not a timer's granularity on top
}

// The proxy is in front of the secret check, so it takes anyone: it holds at most its cap of
// connections (more are closed unserved) and reaps the ones that ended, freeing their places.
TEST(RemoteLink, TheProxyCapsItsConnectionsAndReapsEndedOnes) {
  Served s;
  ShapingProxy link("127.0.0.1", 0, "127.0.0.1", s.server.port(), {std::chrono::microseconds(100), 0}, 2);
  auto connect = [&] {
    std::string why;
    const int fd = net::try_connect("127.0.0.1", link.port(), net::Clock::now() + std::chrono::seconds(5), &why);
    EXPECT_GE(fd, 0) << why;
    return fd;
  };
  auto challenged = [](int fd) {  // the server's first words reach this connection
    std::string c(8 + auth::kNonceBytes, '\0');
    int err = 0;
    return net::recv_all(fd, c.data(), c.size(), net::Clock::now() + std::chrono::seconds(5), &err) ==
           net::IoStatus::ok;
  };
  int a = connect(), b = connect();
  EXPECT_TRUE(challenged(a));
  EXPECT_TRUE(challenged(b));
  int c = connect();
  EXPECT_FALSE(challenged(c));  // the third is closed unserved
  net::close_fd(c);
  net::close_fd(a);
  net::close_fd(b);
  for (int i = 0; i < 500 && link.connections() > 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(link.connections(), 0u);
  int d = connect();
  EXPECT_TRUE(challenged(d));  // the places are free again
  net::close_fd(d);
}

// The proxy, out of descriptors, backs off instead of spinning on its readable listening socket.
TEST(RemoteLink, OutOfDescriptorsTheProxyBacksOff) {
  Served s;
  ShapingProxy link("127.0.0.1", 0, "127.0.0.1", s.server.port(), {std::chrono::microseconds(100), 0});
  auto [early, cpu] = ringbench::testing::cpu_while_a_connection_waits_unaccepted(link.port(), milliseconds(1000));
  EXPECT_LT(cpu, 0.5) << "the proxy spun while out of descriptors";
  ::close(early);
  RemoteDevice b({"127.0.0.1", link.port(), 1.0}, kSecret, milliseconds(5000));
  EXPECT_EQ(read(b, alloc(b, 16), 16), std::vector<char>(16, 0));
}

// A sender the far end does not read from is stopped by the proxy's bounded queue (the socket
// buffers fill), and once the far end is gone the proxy stops reading and closes the sender.
TEST(RemoteLink, TheProxyQueuesBoundedlyAndStopsWhenItsFarEndIsGone) {
  int port = 0;
  int quiet = net::listen_tcp("127.0.0.1", 0, &port);  // connections wait in its backlog, unread
  const int small = 64 << 10;
  ::setsockopt(quiet, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ShapingProxy link("127.0.0.1", 0, "127.0.0.1", port, {std::chrono::microseconds(0), 0});
  std::string why;
  int fd = net::try_connect("127.0.0.1", link.port(), net::Clock::now() + std::chrono::seconds(5), &why);
  ASSERT_GE(fd, 0) << why;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  const std::vector<char> chunk(1 << 16, 'z');
  // Sends for as long as the proxy takes bytes (until `cap`, or 300 ms without progress);
  // whether a send failed (the connection was closed).
  size_t sent = 0;
  auto stream = [&](size_t cap) {
    auto last = std::chrono::steady_clock::now();
    while (sent < cap && std::chrono::steady_clock::now() - last < milliseconds(300)) {
      const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += size_t(n);
        last = std::chrono::steady_clock::now();
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return true;
      } else {
        std::this_thread::sleep_for(milliseconds(1));
      }
    }
    return false;
  };
  EXPECT_FALSE(stream(size_t{96} << 20));
  EXPECT_LT(sent, size_t{64} << 20) << "the proxy queued without bound";
  net::close_fd(quiet);  // the far end resets: the proxy's writes fail
  bool closed = false;
  for (int i = 0; i < 10 && !closed; ++i) closed = stream(sent + (size_t{96} << 20));
  EXPECT_TRUE(closed) << "the proxy kept reading after its far end was gone";
  net::close_fd(fd);
}

}  // namespace
