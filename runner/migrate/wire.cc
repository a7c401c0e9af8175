#include "runner/migrate/wire.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "base/errors.h"
#include "collectives/auth.h"
#include "collectives/net.h"
#include "runner/migrate/framebuffer.h"
#include "runner/migrate/source_gate.h"

namespace ringbench::migrate {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[8] = {'R', 'B', 'M', 'I', 'G', '0', '0', '1'};
enum Record : uint8_t { kChunk = 1, kState = 2, kDone = 3 };
constexpr uint8_t kStored = 'S';

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

// `who`: the other end, as the errors name it ("the migration target at 10.0.0.2:4242").
void put(int fd, const void* p, size_t n, Millis timeout, const char* what, const std::string& who) {
  if (!net::write_all(fd, p, n, Clock::now() + timeout))
    throw TimeoutError(-1, who + " took in none of " + std::string(what) + " for " + std::to_string(timeout.count()) +
                           " ms");
}
void get(int fd, void* p, size_t n, Millis timeout, const char* what, const std::string& who) {
  if (!net::read_all(fd, p, n, Clock::now() + timeout))
    throw TimeoutError(-1, who + " sent no " + std::string(what) + " for " + std::to_string(timeout.count()) + " ms");
}

const std::string kTarget = "the migration target", kSource = "the migration source";
static_assert(sizeof(Hello) == TargetHandshake::kHelloBytes && auth::kMacBytes == TargetHandshake::kMacBytes);

std::string hello_bytes(const Hello& h) { return std::string(reinterpret_cast<const char*>(&h), sizeof h); }

}  // namespace

int connect_target(const std::string& host, int port, const std::string& secret, const StreamShape& shape,
                   Millis timeout) {
  int fd = net::connect_tcp(host, port, Clock::now() + timeout);
  const std::string who = kTarget + " at " + host + ":" + std::to_string(port);
  try {
    net::set_nonblocking(fd);
    net::set_socket_buffers(fd, kStreamSocketBufferBytes);
    Hello h{};
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.framebuffer_bytes = shape.framebuffer_bytes;
    h.chunk_bytes = shape.chunk_bytes;
    h.signature = shape.signature;
    const std::string nonce = auth::random_bytes(auth::kNonceBytes);
    std::memcpy(h.nonce, nonce.data(), nonce.size());
    put(fd, &h, sizeof h, timeout, "the hello", who);
    char reply[auth::kNonceBytes + auth::kMacBytes];
    get(fd, reply, sizeof reply, timeout, "handshake reply", who);
    const std::string theirs(reply, auth::kNonceBytes), their_mac(reply + auth::kNonceBytes, auth::kMacBytes);
    if (!auth::same_mac(their_mac, auth::mac(secret, "migration target", nonce, theirs + hello_bytes(h))))
      throw Error(who + " does not know the job's secret: refusing to send it the rank's state");
    const std::string mine = auth::mac(secret, "migration source", theirs, nonce + hello_bytes(h));
    put(fd, mine.data(), mine.size(), timeout, "the handshake", who);
    return fd;
  } catch (...) {
    net::close_fd(fd);
    throw;
  }
}

void send_chunk(int fd, uint32_t index, const char* data, size_t len, Millis timeout) {
  RecordHeader r{kChunk, {}, index, len};
  put(fd, &r, sizeof r, timeout, "a chunk", kTarget);
  put(fd, data, len, timeout, "a chunk", kTarget);
}

void send_state(int fd, const std::string& state, Millis timeout) {
  RecordHeader r{kState, {}, 0, state.size()};
  put(fd, &r, sizeof r, timeout, "the state", kTarget);
  put(fd, state.data(), state.size(), timeout, "the state", kTarget);
}

void send_done(int fd, Millis timeout) {
  RecordHeader r{kDone, {}, 0, 0};
  put(fd, &r, sizeof r, timeout, "the end of the stream", kTarget);
}

void wait_stored(int fd, Millis timeout) {
  uint8_t b = 0;
  get(fd, &b, 1, timeout, "confirmation that it stored the state", kTarget);
  if (b != kStored) throw Error("the migration target answered " + std::to_string(b) + " instead of 'stored'");
}

std::string TargetHandshake::answer_hello(const std::string& hello, const std::string& secret) {
  Hello h{};
  if (hello.size() != sizeof h) throw Error(who_ + " sent a hello of " + std::to_string(hello.size()) + " bytes");
  std::memcpy(&h, hello.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) throw Error(who_ + " is not a ringbench migration source");
  hello_ = hello;
  nonce_ = auth::random_bytes(auth::kNonceBytes);
  return nonce_ + auth::mac(secret, "migration target", std::string(h.nonce, sizeof h.nonce), nonce_ + hello_);
}

void TargetHandshake::check_mac(const std::string& mac, const std::string& secret) const {
  if (hello_.size() != sizeof(Hello)) throw Error(who_ + " sent its MAC before its hello");
  const std::string theirs = hello_.substr(offsetof(Hello, nonce), auth::kNonceBytes);
  if (!auth::same_mac(mac, auth::mac(secret, "migration source", nonce_, theirs + hello_)))
    throw Error(who_ + " does not know the job's secret");
}

void TargetHandshake::check_shape(const StreamShape& expected) const {
  Hello h{};
  std::memcpy(&h, hello_.data(), std::min(hello_.size(), sizeof h));
  if (h.framebuffer_bytes != expected.framebuffer_bytes || h.chunk_bytes != expected.chunk_bytes ||
      h.signature != expected.signature)
    throw Error(who_ + " sends a framebuffer of " + std::to_string(h.framebuffer_bytes) + " bytes in chunks of " +
                std::to_string(h.chunk_bytes) + " (state signature " + std::to_string(h.signature) +
                "), this target holds " + std::to_string(expected.framebuffer_bytes) + " in chunks of " +
                std::to_string(expected.chunk_bytes) + " (" + std::to_string(expected.signature) + ")");
}

int accept_source(int listen_fd, const std::string& secret, const StreamShape& expected, Clock::time_point deadline,
                  Millis timeout, SourceRefusals* refused) {
  SourceGate gate(listen_fd, secret, expected, timeout);
  try {
    const int fd = gate.accept(deadline);
    if (refused) *refused = gate.refusals();
    return fd;
  } catch (...) {
    if (refused) *refused = gate.refusals();
    throw;
  }
}

std::string receive_stream(int fd, Framebuffer& fb, Millis timeout, uint64_t* bytes_received) {
  std::string state;
  bool have_state = false;
  for (;;) {
    RecordHeader r{};
    get(fd, &r, sizeof r, timeout, "record", kSource);
    if (r.type == kChunk) {
      if (r.index >= fb.chunks() || r.len != fb.chunk_bytes(r.index))
        throw Error("the migration source sent chunk " + std::to_string(r.index) + " of " + std::to_string(r.len) +
                    " bytes: the framebuffer has " + std::to_string(fb.chunks()) + " chunks");
      get(fd, fb.chunk_data(r.index), r.len, timeout, "chunk", kSource);  // checked above: in place
      *bytes_received += r.len;
    } else if (r.type == kState) {
      if (r.len > kMaxStateBytes || have_state)
        throw Error("the migration source sent a state record of " + std::to_string(r.len) + " bytes" +
                    (have_state ? " after one already came" : " (at most 64 MiB)"));
      state.resize(r.len);
      get(fd, state.data(), r.len, timeout, "state", kSource);
      have_state = true;
    } else if (r.type == kDone) {
      if (!have_state) throw Error("the migration source ended its stream without the rank's state");
      return state;
    } else {
      throw Error("the migration source sent a record of unknown type " + std::to_string(r.type));
    }
  }
}

void send_stored(int fd, Millis timeout) { put(fd, &kStored, 1, timeout, "the confirmation", kSource); }

}  // namespace ringbench::migrate
