// TcpStoreServer and TcpStore: the rendezvous store over TCP.
//
// Wire protocol (all integers little-endian, fixed width):
//   connection start (challenge-response on the job's secret, collectives/auth.h):
//       server -> client: the 8-byte magic "RBSTORE2" + a 32-byte nonce Ns
//       client -> server: "RBSTORE2" + a 32-byte nonce Nc + HMAC(secret, "store client", Ns, Nc)
//       server -> client: HMAC(secret, "store server", Nc, Ns)
//     The server closes a connection whose magic or MAC is wrong, or that has not completed the
//     exchange within 10 s, without acting on anything it sent, and counts it (rejected()).
//     The client checks the server's MAC, so it never talks to a store that lacks the secret.
//   request:  op (1 byte: 'S' set, 'G' get, 'A' add) + u32 key length + key
//             + u64 value length + value
//             'S': value = the bytes to store
//             'G': value = u64 timeout in milliseconds
//             'A': value = i64 delta
//   response: status (1 byte: 'O' ok, 'T' timed out, 'E' error) + u64 length + payload
//             'O' payload: 'S' nothing, 'G' the value, 'A' the new counter as i64
//             'E' payload: an error message
// The server answers requests of one connection in order; a client sends one request at a
// time. Blocking GETs are parked in the server and answered when the key appears, or with
// 'T' when their timeout passes, so the server never blocks on a client.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "collectives/auth.h"
#include "base/errors.h"
#include "collectives/store.h"
#include "collectives/store_internal.h"

namespace ringbench {

namespace {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

constexpr char kMagic[8] = {'R', 'B', 'S', 'T', 'O', 'R', 'E', '2'};
constexpr size_t kChallenge = sizeof kMagic + auth::kNonceBytes;                   // server's
constexpr size_t kClientHello = sizeof kMagic + auth::kNonceBytes + auth::kMacBytes;  // client's
// How long a connection may take to prove it knows the secret before the server drops it.
constexpr Millis kHelloTimeout = std::chrono::seconds(10);
constexpr size_t kMaxKey = 4096;
constexpr uint64_t kMaxValue = uint64_t{64} << 20;
constexpr size_t kRequestHeader = 1 + 4;   // op + key length
constexpr size_t kResponseHeader = 1 + 8;  // status + payload length
constexpr char kOk = 'O';
constexpr char kTimedOut = 'T';
constexpr char kFailed = 'E';
// How long a client waits on a SET/ADD (or on the transfer of a reply) before giving up on
// the server: set()/add() take no timeout, yet no wait may be unbounded.
constexpr Millis kIoTimeout = std::chrono::seconds(60);
// Extra time a client gives the server to answer a GET after the GET's own timeout.
constexpr Millis kGetGrace = std::chrono::seconds(2);

using store_detail::clamp_timeout;
using store_detail::key_timeout_text;
using store_detail::parse_int64;
using store_detail::seconds_text;

// Milliseconds until `deadline`, rounded up, for poll().
int poll_ms(TimePoint deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<Millis>(left).count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

std::string encode_u64(uint64_t v) {
  std::string s;
  put_u64(s, v);
  return s;
}

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  check_errno(flags >= 0, "store: fcntl(F_GETFL)");
  check_errno(fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0, "store: fcntl(F_SETFL, O_NONBLOCK)");
}

void close_fd(int& fd) {
  if (fd >= 0) {
    ::close(fd);  // never retried on EINTR: Linux releases the descriptor regardless
    fd = -1;
  }
}

int bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  check_errno(getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0, "store: getsockname");
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  throw Error("store: listening socket is not an IP socket");
}

// ---------------------------------------------------------------------------------------
// Server state; lives on the serve() thread's stack.

struct Conn {
  enum class Phase { hello, header, key, value_length, value };
  uint64_t id = 0;
  int fd = -1;
  std::string in;  // received, unparsed bytes start at in_pos
  size_t in_pos = 0;
  std::string out;  // bytes to send start at out_pos
  size_t out_pos = 0;
  bool dead = false;
  Phase phase = Phase::hello;
  char op = 0;
  uint32_t key_length = 0;
  uint64_t value_length = 0;
  std::string key;
  bool rejected = false;  // the current request was answered with 'E'; its bytes are skipped
  uint64_t skip = 0;
  bool parked = false;  // a GET waits for `key` until `deadline`
  TimePoint deadline{};
  std::string nonce;        // the server's challenge to this connection
  TimePoint hello_by{};     // it must answer by then

  bool authenticated() const { return phase != Phase::hello; }

  size_t unparsed() const { return in.size() - in_pos; }
  size_t pending_out() const { return out.size() - out_pos; }
};

void reply(Conn& c, char status, const std::string& payload) {
  c.out.push_back(status);
  put_u64(c.out, payload.size());
  c.out += payload;
}

class Server {
 public:
  Server(int listen_fd, int wake_fd, std::atomic<int>& clients, std::atomic<int>& rejected,
         const std::string& secret)
      : listen_fd_(listen_fd), wake_fd_(wake_fd), clients_(clients), rejected_(rejected), secret_(secret) {}
  ~Server() {
    for (auto& [id, c] : conns_) close_fd(c.fd);
  }
  void run();

 private:
  // Stop reading from a client that has this much unparsed input (a full request fits).
  static constexpr size_t kReadCap = kMaxValue + kMaxKey + 64;
  // Stop parsing a client's requests while this much of its output waits to be sent.
  static constexpr size_t kOutCap = size_t{4} << 20;
  static constexpr size_t kReadPerEvent = size_t{4} << 20;

  void accept_all();
  void read_from(Conn& c);
  void write_to(Conn& c);
  bool process(Conn& c);  // parses and executes what it can; true if it made progress
  void execute(Conn& c, std::string value);
  void wake_waiters(const std::string& key);
  void expire(TimePoint now);
  void unpark(Conn& c);
  void reap();
  bool check_hello(Conn& c);
  static size_t read_cap(const Conn& c) { return c.authenticated() ? kReadCap : kClientHello; }

  int listen_fd_;
  int wake_fd_;
  std::atomic<int>& clients_;   // connected clients, for TcpStoreServer::linger()
  std::atomic<int>& rejected_;  // connections that failed the challenge
  const std::string secret_;
  uint64_t next_id_ = 0;
  std::map<uint64_t, Conn> conns_;
  std::map<std::string, Bytes> kv_;
  std::map<std::string, std::vector<uint64_t>> waiters_;  // key -> parked connections
  std::vector<char> buf_ = std::vector<char>(size_t{256} << 10);
};

void Server::run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  for (;;) {
    fds.clear();
    ids.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    bool have_deadline = false;
    TimePoint next_deadline{};
    for (auto& [id, c] : conns_) {
      short events = 0;
      if (c.unparsed() < read_cap(c)) events |= POLLIN;
      if (c.pending_out() > 0) events |= POLLOUT;
      fds.push_back({c.fd, events, 0});
      ids.push_back(id);
      if (c.parked && (!have_deadline || c.deadline < next_deadline)) {
        next_deadline = c.deadline;
        have_deadline = true;
      }
      if (!c.authenticated() && (!have_deadline || c.hello_by < next_deadline)) {
        next_deadline = c.hello_by;
        have_deadline = true;
      }
    }
    const int timeout = have_deadline ? poll_ms(next_deadline) : -1;
    const int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "store server: poll");
    }
    if (fds[0].revents != 0) return;  // asked to stop
    if (fds[1].revents & POLLIN) accept_all();
    for (size_t i = 0; i < ids.size(); ++i) {
      const short re = fds[i + 2].revents;
      if (re == 0) continue;
      auto it = conns_.find(ids[i]);
      if (it == conns_.end()) continue;
      Conn& c = it->second;
      if (re & (POLLIN | POLLHUP | POLLERR)) read_from(c);
      if (!c.dead && (re & POLLOUT)) write_to(c);
    }
    expire(Clock::now());
    // Executing one client's request can unpark another's GET, whose next requests may then
    // run: repeat until nothing moves.
    for (bool progress = true; progress;) {
      progress = false;
      for (auto& [id, c] : conns_) {
        if (!c.dead && process(c)) progress = true;
      }
    }
    for (auto& [id, c] : conns_) {
      if (!c.dead && c.pending_out() > 0) write_to(c);
    }
    reap();
    clients_ = static_cast<int>(conns_.size());
  }
}

void Server::accept_all() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN, or out of descriptors: try again on the next readiness
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const uint64_t id = next_id_++;
    Conn& c = conns_[id];
    c.id = id;
    c.fd = fd;
    c.nonce = auth::random_bytes(auth::kNonceBytes);
    c.hello_by = Clock::now() + kHelloTimeout;
    c.out.assign(kMagic, sizeof kMagic);
    c.out += c.nonce;
  }
}

void Server::read_from(Conn& c) {
  size_t got = 0;
  while (c.unparsed() < read_cap(c) && got < kReadPerEvent) {
    const ssize_t r = ::recv(c.fd, buf_.data(), buf_.size(), 0);
    if (r > 0) {
      if (c.in_pos > 0 && c.in_pos == c.in.size()) {
        c.in.clear();
        c.in_pos = 0;
      }
      c.in.append(buf_.data(), static_cast<size_t>(r));
      got += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.dead = true;  // closed by the client, or reset
    return;
  }
}

void Server::write_to(Conn& c) {
  while (c.pending_out() > 0) {
    const ssize_t r =
        ::send(c.fd, c.out.data() + c.out_pos, c.pending_out(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r >= 0) {
      c.out_pos += static_cast<size_t>(r);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    c.dead = true;
    return;
  }
  if (c.out_pos == c.out.size()) {
    c.out.clear();
    c.out_pos = 0;
  } else if (c.out_pos > (size_t{1} << 20) && c.out_pos > c.out.size() / 2) {
    c.out.erase(0, c.out_pos);
    c.out_pos = 0;
  }
}

bool Server::process(Conn& c) {
  bool progress = false;
  const auto consume = [&c](size_t n) {
    const char* p = c.in.data() + c.in_pos;
    c.in_pos += n;
    return p;
  };
  while (!c.dead && !c.parked && c.pending_out() < kOutCap) {
    const size_t avail = c.unparsed();
    if (c.phase == Conn::Phase::hello) {
      if (avail >= sizeof kMagic && std::memcmp(c.in.data() + c.in_pos, kMagic, sizeof kMagic) != 0) {
        c.dead = true;  // not a ringbench client of this version: no need to wait for the rest
        ++rejected_;
        break;
      }
      if (avail < kClientHello) break;
      if (!check_hello(c)) break;
    } else if (c.skip > 0) {
      if (avail == 0) break;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(c.skip, avail));
      consume(n);
      c.skip -= n;
    } else if (c.phase == Conn::Phase::header) {
      if (avail < kRequestHeader) break;
      const char* p = consume(kRequestHeader);
      c.op = p[0];
      c.key_length = get_u32(p + 1);
      c.rejected = false;
      c.key.clear();
      if (c.op != 'S' && c.op != 'G' && c.op != 'A') {
        c.dead = true;  // the stream cannot be trusted any more
        break;
      }
      if (c.key_length > kMaxKey) {
        reply(c, kFailed,
              "key of " + std::to_string(c.key_length) + " bytes exceeds the limit of " +
                  std::to_string(kMaxKey) + " bytes");
        c.rejected = true;
        c.skip = c.key_length;
      }
      c.phase = Conn::Phase::key;
    } else if (c.phase == Conn::Phase::key) {
      if (!c.rejected) {
        if (avail < c.key_length) break;
        c.key.assign(consume(c.key_length), c.key_length);
      }
      c.phase = Conn::Phase::value_length;
    } else if (c.phase == Conn::Phase::value_length) {
      if (avail < 8) break;
      c.value_length = get_u64(consume(8));
      if (!c.rejected) {
        std::string why;
        if (c.op == 'S' && c.value_length > kMaxValue) {
          why = "value of " + std::to_string(c.value_length) + " bytes exceeds the limit of " +
                std::to_string(kMaxValue) + " bytes";
        } else if (c.op != 'S' && c.value_length != 8) {
          why = std::string("malformed '") + c.op + "' request: argument of " +
                std::to_string(c.value_length) + " bytes, expected 8";
        }
        if (!why.empty()) {
          reply(c, kFailed, why);
          c.rejected = true;
        }
      }
      if (c.rejected) c.skip = c.value_length;
      c.phase = Conn::Phase::value;
    } else {  // value
      if (c.rejected) {
        c.phase = Conn::Phase::header;  // its bytes have been skipped
      } else {
        if (avail < c.value_length) break;
        const size_t n = static_cast<size_t>(c.value_length);
        std::string value(consume(n), n);
        c.phase = Conn::Phase::header;
        execute(c, std::move(value));
      }
    }
    progress = true;
  }
  if (c.in_pos == c.in.size()) {
    c.in.clear();
    c.in_pos = 0;
  } else if (c.in_pos > 0 && c.in_pos >= c.in.size() / 2) {
    c.in.erase(0, c.in_pos);
    c.in_pos = 0;
  }
  return progress;
}

// The client's answer to the challenge: a wrong magic or MAC closes the connection unanswered.
bool Server::check_hello(Conn& c) {
  const char* p = c.in.data() + c.in_pos;
  c.in_pos += kClientHello;
  const std::string client_nonce(p + sizeof kMagic, auth::kNonceBytes);
  const std::string answer(p + sizeof kMagic + auth::kNonceBytes, auth::kMacBytes);
  if (std::memcmp(p, kMagic, sizeof kMagic) != 0 ||
      !auth::same_mac(answer, auth::mac(secret_, "store client", c.nonce, client_nonce))) {
    c.dead = true;
    ++rejected_;
    return false;
  }
  c.out += auth::mac(secret_, "store server", client_nonce, c.nonce);
  c.phase = Conn::Phase::header;
  return true;
}

void Server::execute(Conn& c, std::string value) {
  if (c.op == 'S') {
    kv_[c.key] = std::move(value);
    reply(c, kOk, {});
    wake_waiters(c.key);
  } else if (c.op == 'G') {
    auto it = kv_.find(c.key);
    if (it != kv_.end()) {
      reply(c, kOk, it->second);
      return;
    }
    const uint64_t ms = get_u64(value.data());
    if (ms == 0) {
      reply(c, kTimedOut, {});
      return;
    }
    constexpr uint64_t kMaxMs = uint64_t{365} * 24 * 3600 * 1000;
    c.parked = true;
    c.deadline = Clock::now() + Millis(static_cast<int64_t>(std::min(ms, kMaxMs)));
    waiters_[c.key].push_back(c.id);
  } else {  // 'A'
    const auto delta = static_cast<int64_t>(get_u64(value.data()));
    int64_t current = 0;
    auto it = kv_.find(c.key);
    if (it != kv_.end() && !parse_int64(it->second, current)) {
      reply(c, kFailed, "value of key '" + c.key + "' is not an integer");
      return;
    }
    int64_t result = 0;
    if (__builtin_add_overflow(current, delta, &result)) {
      reply(c, kFailed, "counter '" + c.key + "' overflows");
      return;
    }
    kv_[c.key] = std::to_string(result);
    reply(c, kOk, encode_u64(static_cast<uint64_t>(result)));
    wake_waiters(c.key);
  }
}

void Server::wake_waiters(const std::string& key) {
  auto w = waiters_.find(key);
  if (w == waiters_.end()) return;
  const Bytes& value = kv_.at(key);
  for (uint64_t id : w->second) {
    auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    Conn& c = it->second;
    if (!c.parked || c.key != key) continue;
    c.parked = false;
    if (!c.dead) reply(c, kOk, value);
  }
  waiters_.erase(w);
}

void Server::unpark(Conn& c) {
  if (!c.parked) return;
  c.parked = false;
  auto w = waiters_.find(c.key);
  if (w == waiters_.end()) return;
  auto& ids = w->second;
  ids.erase(std::remove(ids.begin(), ids.end(), c.id), ids.end());
  if (ids.empty()) waiters_.erase(w);
}

void Server::expire(TimePoint now) {
  for (auto& [id, c] : conns_) {
    if (!c.authenticated() && !c.dead && c.hello_by <= now) {
      c.dead = true;  // connected and never proved it knows the secret
      ++rejected_;
    }
    if (c.parked && c.deadline <= now) {
      unpark(c);
      if (!c.dead) reply(c, kTimedOut, {});
    }
  }
}

void Server::reap() {
  for (auto it = conns_.begin(); it != conns_.end();) {
    if (it->second.dead) {
      unpark(it->second);
      close_fd(it->second.fd);
      it = conns_.erase(it);
    } else {
      ++it;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Client helpers. All waits go through poll() with a deadline; the socket is non-blocking.

enum class IoResult { ok, timeout, closed, failed };

// Waits for `events` on `fd`; false when the deadline passes first.
bool wait_for(int fd, short events, TimePoint deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, poll_ms(deadline));
    if (n > 0) return true;
    if (n == 0) {
      if (Clock::now() >= deadline) return false;
      continue;
    }
    if (errno != EINTR) return true;  // let the following send/recv report the error
  }
}

IoResult send_all(int fd, const char* data, size_t len, TimePoint deadline, int& err) {
  while (len > 0) {
    const ssize_t r = ::send(fd, data, len, MSG_NOSIGNAL);
    if (r >= 0) {
      data += r;
      len -= static_cast<size_t>(r);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd, POLLOUT, deadline)) return IoResult::timeout;
      continue;
    }
    err = errno;
    return (errno == EPIPE || errno == ECONNRESET) ? IoResult::closed : IoResult::failed;
  }
  return IoResult::ok;
}

IoResult recv_all(int fd, char* data, size_t len, TimePoint deadline, int& err) {
  while (len > 0) {
    const ssize_t r = ::recv(fd, data, len, 0);
    if (r > 0) {
      data += r;
      len -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return IoResult::closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd, POLLIN, deadline)) return IoResult::timeout;
      continue;
    }
    err = errno;
    return errno == ECONNRESET ? IoResult::closed : IoResult::failed;
  }
  return IoResult::ok;
}

// One non-blocking connect attempt to `addr`, bounded by `deadline`. Returns the connected
// socket, or -1 with `err` set.
int connect_once(const addrinfo& ai, TimePoint deadline, int& err) {
  int fd = ::socket(ai.ai_family, ai.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai.ai_protocol);
  if (fd < 0) {
    err = errno;
    return -1;
  }
  const int rc = ::connect(fd, ai.ai_addr, ai.ai_addrlen);
  // An interrupted non-blocking connect goes on asynchronously, like EINPROGRESS.
  if (rc != 0 && errno != EINPROGRESS && errno != EINTR) {
    err = errno;
    close_fd(fd);
    return -1;
  }
  if (rc != 0) {
    if (!wait_for(fd, POLLOUT, deadline)) {
      err = ETIMEDOUT;
      close_fd(fd);
      return -1;
    }
    int so_error = 0;
    socklen_t len = sizeof so_error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
    if (so_error != 0) {
      err = so_error;
      close_fd(fd);
      return -1;
    }
  }
  // Connecting to a free local port can, rarely, connect the socket to itself (TCP
  // simultaneous open). That is not a server.
  sockaddr_storage self{};
  sockaddr_storage peer{};
  socklen_t self_len = sizeof self;
  socklen_t peer_len = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_len) == 0 &&
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
      self_len == peer_len && std::memcmp(&self, &peer, self_len) == 0) {
    err = ECONNREFUSED;
    close_fd(fd);
    return -1;
  }
  return fd;
}

// ---------------------------------------------------------------------------------------
// TcpStoreServer

// Binds addr:port (port 0 = ephemeral; "" or "*" = every address) and listens; returns the
// socket.
int listen_on(const std::string& addr, int port) {
  if (port < 0 || port > 65535) {
    throw Error("store server: port " + std::to_string(port) + " is out of range 0-65535");
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const char* node = (addr.empty() || addr == "*") ? nullptr : addr.c_str();
  const int gai = ::getaddrinfo(node, service.c_str(), &hints, &res);
  if (gai != 0) {
    throw Error("store server: cannot resolve '" + addr + "': " + ::gai_strerror(gai));
  }
  std::string last_error = "no IPv4 address";
  int listen_fd = -1;
  for (addrinfo* ai = res; ai != nullptr && listen_fd < 0; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      last_error = std::string("bind: ") + std::strerror(errno);
      close_fd(fd);
      continue;
    }
    if (::listen(fd, SOMAXCONN) != 0) {
      last_error = std::string("listen: ") + std::strerror(errno);
      close_fd(fd);
      continue;
    }
    listen_fd = fd;
  }
  ::freeaddrinfo(res);
  if (listen_fd < 0) {
    throw Error("store server: cannot listen on " + addr + ":" + service + ": " + last_error);
  }
  return listen_fd;
}

}  // namespace

TcpStoreServer::TcpStoreServer(const std::string& addr, int port, const std::string& secret)
    : TcpStoreServer(listen_on(addr, port), secret) {}

TcpStoreServer::TcpStoreServer(int listen_fd, const std::string& secret) : secret_(secret) {
  if (listen_fd < 0) throw Error("store server: invalid listening socket");
  listen_fd_ = listen_fd;
  try {
    port_ = bound_port(listen_fd_);
    set_nonblocking(listen_fd_);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    check_errno(wake_fd_ >= 0, "store server: eventfd");
    thread_ = std::thread(&TcpStoreServer::serve, this);
  } catch (...) {
    close_fd(wake_fd_);
    close_fd(listen_fd_);
    throw;
  }
}

TcpStoreServer::~TcpStoreServer() {
  const uint64_t one = 1;
  for (;;) {
    const ssize_t r = ::write(wake_fd_, &one, sizeof one);
    if (r >= 0 || errno != EINTR) break;
  }
  if (thread_.joinable()) thread_.join();
  close_fd(wake_fd_);
  close_fd(listen_fd_);
}

bool TcpStoreServer::linger(Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  while (clients_ > 0) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(Millis(10));
  }
  return true;
}

void TcpStoreServer::serve() {
  // Connections close when `server` goes out of scope, so waiting clients see EOF.
  try {
    Server server(listen_fd_, wake_fd_, clients_, rejected_, secret_);
    server.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringbench: store server on port %d failed: %s\n", port_, e.what());
  }
}

// ---------------------------------------------------------------------------------------
// TcpStore

TcpStore::TcpStore(const std::string& host, int port, Millis timeout, const std::string& secret)
    : host_(host), port_(port) {
  const std::string where = host + ":" + std::to_string(port);
  if (port <= 0 || port > 65535) {
    throw Error("store " + where + ": port is out of range 1-65535");
  }
  const auto deadline = Clock::now() + clamp_timeout(timeout);
  std::string last_error = "timed out";
  auto backoff = Millis(10);
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const std::string service = std::to_string(port);
    const int gai = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
    if (gai != 0) {
      last_error = std::string("cannot resolve host: ") + ::gai_strerror(gai);
    } else {
      for (addrinfo* ai = res; ai != nullptr && fd_ < 0; ai = ai->ai_next) {
        int err = 0;
        fd_ = connect_once(*ai, deadline, err);
        if (fd_ < 0) last_error = std::strerror(err);
      }
      ::freeaddrinfo(res);
    }
    if (fd_ >= 0) {
      const int one = 1;
      ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      // The hello fits in any socket buffer; give it a moment even when the deadline is near.
      const auto hello_deadline = std::max(deadline, Clock::now() + Millis(1000));
      const std::string why = authenticate(secret, hello_deadline);
      if (why.empty()) return;
      last_error = why;
      close_fd(fd_);
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    const auto left = std::chrono::ceil<Millis>(deadline - now);
    std::this_thread::sleep_for(std::min(backoff, left));
    backoff = std::min(backoff * 2, Millis(500));
  }
  throw TimeoutError(-1, "could not connect to store " + where + " within " +
                             seconds_text(timeout) + " s: " + last_error);
}

// Answers the server's challenge and checks its answer to ours; returns "" when both prove they
// know `secret`, else why not (a connection problem, worth retrying). A server that does not
// know the secret, or rejects ours, is an Error at once: retrying cannot help.
std::string TcpStore::authenticate(const std::string& secret, TimePoint deadline) {
  const std::string where = host_ + ":" + std::to_string(port_);
  const auto io_error = [](IoResult r, int err, const char* doing) {
    return std::string(r == IoResult::timeout ? "timed out " : "connection closed ") + doing +
           (err != 0 ? std::string(": ") + std::strerror(err) : std::string());
  };
  int err = 0;
  char challenge[kChallenge];
  IoResult r = recv_all(fd_, challenge, sizeof challenge, deadline, err);
  if (r != IoResult::ok) return io_error(r, err, "waiting for the store's challenge");
  if (std::memcmp(challenge, kMagic, sizeof kMagic) != 0)
    throw IoError(-1, "store " + where + " is not a ringbench store of this version (bad challenge)");
  const std::string server_nonce(challenge + sizeof kMagic, auth::kNonceBytes);
  const std::string nonce = auth::random_bytes(auth::kNonceBytes);
  std::string hello(kMagic, sizeof kMagic);
  hello += nonce;
  hello += auth::mac(secret, "store client", server_nonce, nonce);
  r = send_all(fd_, hello.data(), hello.size(), deadline, err);
  if (r != IoResult::ok) return io_error(r, err, "sending the answer to the store's challenge");
  std::string answer(auth::kMacBytes, '\0');
  r = recv_all(fd_, answer.data(), answer.size(), deadline, err);
  if (r == IoResult::closed)
    throw IoError(-1, "store " + where + " rejected this rank: it does not share the job's secret "
                      "(RINGBENCH_SECRET or --secret-file must be the same on every rank)");
  if (r != IoResult::ok) return io_error(r, err, "waiting for the store's answer");
  if (!auth::same_mac(answer, auth::mac(secret, "store server", nonce, server_nonce)))
    throw IoError(-1, "store " + where + " does not know the job's secret: not this job's store");
  return "";
}

TcpStore::~TcpStore() { close_fd(fd_); }

std::string TcpStore::describe() const { return "tcp://" + host_ + ":" + std::to_string(port_); }

std::string TcpStore::local_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  check_errno(::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0,
              "store " + describe() + ": getsockname");
  char text[INET6_ADDRSTRLEN] = {};
  const void* a = nullptr;
  if (ss.ss_family == AF_INET) {
    a = &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr;
  } else if (ss.ss_family == AF_INET6) {
    a = &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
  } else {
    throw Error("store " + describe() + ": connection is not an IP socket");
  }
  check_errno(::inet_ntop(ss.ss_family, a, text, sizeof text) != nullptr,
              "store " + describe() + ": inet_ntop");
  return text;
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  request('S', key, value, kIoTimeout);
}

Bytes TcpStore::get(const std::string& key, Millis timeout) {
  const Millis t = clamp_timeout(timeout);
  return request('G', key, encode_u64(static_cast<uint64_t>(t.count())), t);
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  const Bytes r = request('A', key, encode_u64(static_cast<uint64_t>(delta)), kIoTimeout);
  if (r.size() != 8) {
    throw IoError(-1, "store " + describe() + ": malformed reply to add (" +
                          std::to_string(r.size()) + " bytes)");
  }
  return static_cast<int64_t>(get_u64(r.data()));
}

// Sends one request and reads its reply. `timeout` is the GET's wait (the server answers by
// then), or the I/O limit for SET/ADD. After any transport failure the connection is shut down:
// the byte stream may be out of step, so later requests fail fast instead of reading a stale
// reply. (fd_ itself stays valid so that local_address() needs no lock.)
Bytes TcpStore::request(char op, const std::string& key, const Bytes& value, Millis timeout) {
  const std::string where = host_ + ":" + std::to_string(port_);
  if (key.size() > kMaxKey) {
    throw Error("store " + describe() + ": key of " + std::to_string(key.size()) +
                " bytes exceeds the limit of " + std::to_string(kMaxKey) + " bytes");
  }
  if (value.size() > kMaxValue) {
    throw Error("store " + describe() + ": value of " + std::to_string(value.size()) +
                " bytes for key '" + key + "' exceeds the limit of " + std::to_string(kMaxValue) +
                " bytes");
  }
  std::string head;
  head.reserve(kRequestHeader + key.size() + 8);
  head.push_back(op);
  put_u32(head, static_cast<uint32_t>(key.size()));
  head += key;
  put_u64(head, value.size());

  std::lock_guard<std::mutex> lock(mu_);
  const auto fail = [&](IoResult r, int err, const std::string& doing) {
    ::shutdown(fd_, SHUT_RDWR);
    if (r == IoResult::closed) throw IoError(-1, "store " + where + " closed the connection");
    if (r == IoResult::timeout) {
      if (op == 'G' && doing == "waiting for the reply") {
        throw TimeoutError(-1, key_timeout_text(key, timeout, describe()) +
                                   " (the store did not answer)");
      }
      throw TimeoutError(-1, "store " + where + " did not respond within " +
                                 seconds_text(kIoTimeout) + " s while " + doing);
    }
    throw IoError(-1, "store " + where + ": " + doing + ": " + std::strerror(err));
  };

  int err = 0;
  auto deadline = Clock::now() + kIoTimeout;
  IoResult r = send_all(fd_, head.data(), head.size(), deadline, err);
  if (r == IoResult::ok) r = send_all(fd_, value.data(), value.size(), deadline, err);
  if (r != IoResult::ok) fail(r, err, "sending a request");

  char status_head[kResponseHeader];
  deadline = Clock::now() + (op == 'G' ? timeout + kGetGrace : kIoTimeout);
  r = recv_all(fd_, status_head, sizeof status_head, deadline, err);
  if (r != IoResult::ok) fail(r, err, "waiting for the reply");
  const char status = status_head[0];
  const uint64_t length = get_u64(status_head + 1);
  if ((status != kOk && status != kTimedOut && status != kFailed) || length > kMaxValue + 65536) {
    ::shutdown(fd_, SHUT_RDWR);
    throw IoError(-1, "store " + where + " sent a malformed reply (is it a ringbench store?)");
  }
  Bytes payload(static_cast<size_t>(length), '\0');
  deadline = Clock::now() + kIoTimeout;
  r = recv_all(fd_, payload.data(), payload.size(), deadline, err);
  if (r != IoResult::ok) fail(r, err, "reading the reply");

  if (status == kTimedOut) throw KeyTimeoutError(-1, key_timeout_text(key, timeout, describe()));
  if (status == kFailed) throw Error("store " + describe() + ": " + payload);
  return payload;
}

}  // namespace ringbench
