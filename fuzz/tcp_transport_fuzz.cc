// libFuzzer: the TCP transport (collectives/transport/tcp/) as rank 0 of 2, with this harness
// as rank 1 speaking collectives/transport/tcp/tcp_wire.h.
// Input: byte 0, bit 0 set = the Hello's MAC is wrong (the unauthenticated path); then the
// Hello's fields after its magic (version, ranks, world size, socket index, job id, nonce), as
// many as the input holds over a valid Hello; the rest is the frames sent once connected.
// A Hello that rank 0 rejects is followed by a valid one, which must then be accepted; rank 0
// posts one receive and must end with it done or failed with an Error, never a crash or a hang.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collectives/auth.h"
#include "base/errors.h"
#include "collectives/net.h"
#include "collectives/store.h"
#include "collectives/transport/tcp/tcp_transport.h"
#include "collectives/transport/tcp/tcp_wire.h"

namespace {

using namespace ringbench;
using namespace ringbench::tcp_wire;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const std::string kSecret(auth::kSecretBytes, 't');
const char kJob[] = "fuzz";

TcpOptions rank0_options() {
  TcpOptions o;
  o.sockets_per_peer = 1;
  o.timeout = milliseconds(3000);
  o.secret = kSecret;
  o.job_id = kJob;
  return o;
}

Hello valid_hello() {
  Hello h{};
  std::memcpy(h.magic, kTcpMagic, sizeof kTcpMagic);
  h.version = kProtocolVersion;
  h.from_rank = 1;
  h.to_rank = 0;
  h.world_size = 2;
  h.socket_index = 0;
  h.sockets_per_peer = 1;
  std::memcpy(h.job_id, kJob, sizeof kJob);
  return h;
}

// Connects to rank 0 and offers `h`; true if rank 0 accepted it.
bool offer(const std::string& host, int port, Hello h, bool bad_mac, int& fd,
           Clock::time_point deadline) {
  fd = net::connect_tcp(host, port, deadline);
  Challenge ch{};
  if (!net::read_all(fd, &ch, sizeof ch, deadline)) return false;
  std::string m = auth::mac(kSecret, "tcp client", std::string(ch.nonce, sizeof ch.nonce), signed_part(h));
  if (bad_mac) m[0] = static_cast<char>(m[0] ^ 1);
  std::memcpy(h.mac, m.data(), sizeof h.mac);
  HelloReply reply{};
  try {
    if (!net::write_all(fd, &h, sizeof h, deadline) || !net::read_all(fd, &reply, sizeof reply, deadline))
      return false;
  } catch (const Error&) {  // closed unanswered
    return false;
  }
  return reply.status == 0;
}

// Rank 0: connects, posts one receive of 64 bytes with tag 7, waits for it briefly.
void run_rank0(Store& store) {
  try {
    auto t = make_tcp_transport(store, 0, 2, rank0_options());
    std::vector<char> data(64);
    auto buf = t->register_buffer(data.data(), data.size());
    auto r = t->irecv(1, *buf, 0, data.size(), 7);
    r->wait(milliseconds(200));
  } catch (const Error&) {  // a timeout, a corrupt stream, a closed peer: all named errors
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  InProcStore store;
  std::thread rank0([&store] { run_rank0(store); });
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  store.set("tcp/addr/1", "127.0.0.1:9");  // rank 1 never listens: it has no higher peer
  const auto [host, port] = parse_host_port(store.get("tcp/addr/0", milliseconds(3000)));

  Hello h = valid_hello();
  const size_t fields = std::min(size - 1, offsetof(Hello, mac) - sizeof h.magic);
  std::memcpy(reinterpret_cast<char*>(&h) + sizeof h.magic, data + 1, fields);
  int fd = -1;
  bool connected = offer(host, port, h, data[0] & 1, fd, deadline);
  if (!connected) {
    ::close(fd);
    if (!offer(host, port, valid_hello(), false, fd, deadline)) {
      std::fprintf(stderr, "rank 0 rejected a valid Hello after a bad one\n");
      std::abort();
    }
  }
  const size_t used = 1 + fields;
  try {
    net::write_all(fd, data + used, size - used, deadline);
  } catch (const Error&) {  // rank 0 closed: a corrupt stream ends the connection
  }
  ::close(fd);  // rank 0 reads what was sent, then sees the peer leave
  rank0.join();
  return 0;
}
