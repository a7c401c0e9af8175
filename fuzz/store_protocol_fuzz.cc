// libFuzzer: the store server (collectives/store_server.cc) fed arbitrary bytes by a client.
// Input: byte 0, bit 0 set = the client first authenticates with the job's secret, as TcpStore
// does (the rest then reaches the request parser); clear = the rest is the client's hello (the
// pre-authentication path every stranger reaches). After every input a legitimate client must
// still be served: a server that crashed, hung or lost its state fails the run.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "collectives/auth.h"
#include "base/errors.h"
#include "collectives/net.h"
#include "collectives/store.h"

namespace {

using namespace ringbench;
using Clock = std::chrono::steady_clock;

const std::string kSecret(auth::kSecretBytes, 's');
constexpr char kMagic[] = "RBSTORE2";  // the wire protocol's, as documented in collectives/store_wire.h

struct Fixture {
  TcpStoreServer server{"127.0.0.1", 0, kSecret};
  TcpStore client{"127.0.0.1", server.port(), std::chrono::seconds(5), kSecret};
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

// Answers the server's challenge with the secret; false if the server did not accept it.
bool authenticate(int fd, Clock::time_point deadline) {
  char challenge[8 + auth::kNonceBytes];
  if (!net::read_all(fd, challenge, sizeof challenge, deadline)) return false;
  const std::string server_nonce(challenge + 8, auth::kNonceBytes);
  const std::string nonce = auth::random_bytes(auth::kNonceBytes);
  const std::string hello =
      std::string(kMagic, 8) + nonce + auth::mac(kSecret, "store client", server_nonce, nonce);
  std::string answer(auth::kMacBytes, '\0');
  return net::write_all(fd, hello.data(), hello.size(), deadline) &&
         net::read_all(fd, answer.data(), answer.size(), deadline);
}

// Reads what the server answers until it closes or stays silent for a moment.
void drain(int fd, Clock::time_point deadline) {
  ::shutdown(fd, SHUT_WR);
  char buf[4096];
  try {
    while (net::read_all(fd, buf, 1, std::min(deadline, Clock::now() + std::chrono::milliseconds(20)))) {
    }
  } catch (const Error&) {  // closed by the server: what a bad request deserves
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Fixture& f = fixture();
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  const int fd = net::connect_tcp("127.0.0.1", f.server.port(), deadline);
  try {
    if ((data[0] & 1) == 0 || authenticate(fd, deadline)) {
      if (!(data[0] & 1)) {  // the stranger reads the challenge first, as a client would
        char challenge[8 + auth::kNonceBytes];
        net::read_all(fd, challenge, sizeof challenge, deadline);
      }
      net::write_all(fd, data + 1, size - 1, deadline);
    }
    drain(fd, deadline);
  } catch (const Error&) {  // the server closed the connection: its right
  }
  ::close(fd);
  // The server still serves a legitimate client, with its state intact.
  static uint64_t round = 0;
  const std::string value = "alive " + std::to_string(++round);
  f.client.set("fuzz/probe", value);
  if (f.client.get("fuzz/probe", std::chrono::seconds(5)) != value) {
    std::fprintf(stderr, "store server lost a legitimate client's value\n");
    std::abort();
  }
  return 0;
}
