#include "runner/migrate/wire.h"

#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <vector>

#include "base/errors.h"
#include "collectives/auth.h"
#include "collectives/net.h"
#include "runner/migrate/framebuffer.h"

namespace ringbench::migrate {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[8] = {'R', 'B', 'M', 'I', 'G', '0', '0', '1'};
enum Record : uint8_t { kChunk = 1, kState = 2, kDone = 3 };
constexpr uint8_t kStored = 'S';
constexpr int kSocketBufferBytes = 8 << 20;  // a bulk stream: two chunks in flight

struct Hello {
  char magic[8];
  uint64_t framebuffer_bytes, chunk_bytes, signature;
  char nonce[auth::kNonceBytes];
};
struct RecordHeader {
  uint8_t type;
  uint8_t pad[3];
  uint32_t index;
  uint64_t len;
};

void put(int fd, const void* p, size_t n, Millis timeout, const char* what) {
  if (!net::write_all(fd, p, n, Clock::now() + timeout))
    throw TimeoutError(-1, "the migration peer took in none of " + std::string(what) + " for " +
                       std::to_string(timeout.count()) + " ms");
}
void get(int fd, void* p, size_t n, Millis timeout, const char* what) {
  if (!net::read_all(fd, p, n, Clock::now() + timeout))
    throw TimeoutError(-1, "the migration peer sent no " + std::string(what) + " for " + std::to_string(timeout.count()) +
                       " ms");
}

std::string hello_bytes(const Hello& h) { return std::string(reinterpret_cast<const char*>(&h), sizeof h); }

}  // namespace

int connect_target(const std::string& host, int port, const std::string& secret, const StreamShape& shape,
                   Millis timeout) {
  int fd = net::connect_tcp(host, port, Clock::now() + timeout);
  try {
    net::set_nonblocking(fd);
    net::set_socket_buffers(fd, kSocketBufferBytes);
    Hello h{};
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.framebuffer_bytes = shape.framebuffer_bytes;
    h.chunk_bytes = shape.chunk_bytes;
    h.signature = shape.signature;
    const std::string nonce = auth::random_bytes(auth::kNonceBytes);
    std::memcpy(h.nonce, nonce.data(), nonce.size());
    put(fd, &h, sizeof h, timeout, "the hello");
    char reply[auth::kNonceBytes + auth::kMacBytes];
    get(fd, reply, sizeof reply, timeout, "handshake reply");
    const std::string theirs(reply, auth::kNonceBytes), their_mac(reply + auth::kNonceBytes, auth::kMacBytes);
    if (!auth::same_mac(their_mac, auth::mac(secret, "migration target", nonce, theirs + hello_bytes(h))))
      throw Error("the migration target at " + host + ":" + std::to_string(port) +
                  " does not know the job's secret: refusing to send it the rank's state");
    const std::string mine = auth::mac(secret, "migration source", theirs, nonce + hello_bytes(h));
    put(fd, mine.data(), mine.size(), timeout, "the handshake");
    return fd;
  } catch (...) {
    net::close_fd(fd);
    throw;
  }
}

void send_chunk(int fd, uint32_t index, const char* data, size_t len, Millis timeout) {
  RecordHeader r{kChunk, {}, index, len};
  put(fd, &r, sizeof r, timeout, "a chunk");
  put(fd, data, len, timeout, "a chunk");
}

void send_state(int fd, const std::string& state, Millis timeout) {
  RecordHeader r{kState, {}, 0, state.size()};
  put(fd, &r, sizeof r, timeout, "the state");
  put(fd, state.data(), state.size(), timeout, "the state");
}

void send_done(int fd, Millis timeout) {
  RecordHeader r{kDone, {}, 0, 0};
  put(fd, &r, sizeof r, timeout, "the end of the stream");
}

void wait_stored(int fd, Millis timeout) {
  uint8_t b = 0;
  get(fd, &b, 1, timeout, "confirmation that it stored the state");
  if (b != kStored) throw Error("the migration target answered " + std::to_string(b) + " instead of 'stored'");
}

int accept_source(int listen_fd, const std::string& secret, const StreamShape& expected,
                  Clock::time_point deadline, Millis timeout) {
  pollfd p{listen_fd, POLLIN, 0};
  if (::poll(&p, 1, net::poll_ms(deadline)) <= 0)
    throw TimeoutError(-1, "no migration source connected before the deadline");
  int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  check_errno(fd >= 0, "accept (migration target)");
  try {
    net::set_nonblocking(fd);
    net::set_socket_buffers(fd, kSocketBufferBytes);
    const std::string who = "the migration source " + net::peer_address(fd);
    Hello h{};
    get(fd, &h, sizeof h, timeout, "hello");
    if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) throw Error(who + " is not a ringbench migration source");
    const std::string theirs(h.nonce, sizeof h.nonce), nonce = auth::random_bytes(auth::kNonceBytes);
    const std::string reply = nonce + auth::mac(secret, "migration target", theirs, nonce + hello_bytes(h));
    put(fd, reply.data(), reply.size(), timeout, "the handshake");
    char their_mac[auth::kMacBytes];
    get(fd, their_mac, sizeof their_mac, timeout, "handshake MAC");
    if (!auth::same_mac(std::string(their_mac, sizeof their_mac),
                        auth::mac(secret, "migration source", nonce, theirs + hello_bytes(h))))
      throw Error(who + " does not know the job's secret");
    if (h.framebuffer_bytes != expected.framebuffer_bytes || h.chunk_bytes != expected.chunk_bytes ||
        h.signature != expected.signature)
      throw Error(who + " sends a framebuffer of " + std::to_string(h.framebuffer_bytes) + " bytes in chunks of " +
                  std::to_string(h.chunk_bytes) + " (state signature " + std::to_string(h.signature) +
                  "), this target holds " + std::to_string(expected.framebuffer_bytes) + " in chunks of " +
                  std::to_string(expected.chunk_bytes) + " (" + std::to_string(expected.signature) + ")");
    return fd;
  } catch (...) {
    net::close_fd(fd);
    throw;
  }
}

std::string receive_stream(int fd, Framebuffer& fb, Millis timeout, uint64_t* bytes_received) {
  std::string state;
  bool have_state = false;
  for (;;) {
    RecordHeader r{};
    get(fd, &r, sizeof r, timeout, "record");
    if (r.type == kChunk) {
      if (r.index >= fb.chunks() || r.len != fb.chunk_bytes(r.index))
        throw Error("the migration source sent chunk " + std::to_string(r.index) + " of " + std::to_string(r.len) +
                    " bytes: the framebuffer has " + std::to_string(fb.chunks()) + " chunks");
      get(fd, fb.chunk_data(r.index), r.len, timeout, "chunk");  // checked above: in place
      *bytes_received += r.len;
    } else if (r.type == kState) {
      if (r.len > kMaxStateBytes || have_state)
        throw Error("the migration source sent a state record of " + std::to_string(r.len) + " bytes" +
                    (have_state ? " after one already came" : " (at most 64 MiB)"));
      state.resize(r.len);
      get(fd, state.data(), r.len, timeout, "state");
      have_state = true;
    } else if (r.type == kDone) {
      if (!have_state) throw Error("the migration source ended its stream without the rank's state");
      return state;
    } else {
      throw Error("the migration source sent a record of unknown type " + std::to_string(r.type));
    }
  }
}

void send_stored(int fd, Millis timeout) { put(fd, &kStored, 1, timeout, "the confirmation"); }

}  // namespace ringbench::migrate
