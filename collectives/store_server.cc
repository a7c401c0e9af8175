// TcpStoreServer: the TCP store's server, one thread running an event loop over non-blocking
// sockets. The wire protocol is described in store_wire.h.
#include <poll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "collectives/auth.h"
#include "collectives/net.h"
#include "collectives/store.h"
#include "collectives/store_internal.h"
#include "collectives/store_wire.h"

namespace ringbench {

namespace {

using namespace store_wire;  // the protocol's constants, encoding, Clock
using net::close_fd;

// How long a connection may take to prove it knows the secret before the server drops it.
constexpr Millis kHelloTimeout = std::chrono::seconds(10);
// How long the server stops accepting when it is out of descriptors or memory: the pending
// connection keeps the listening socket readable, so retrying at once would spin.

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
  // The next n unparsed bytes, now parsed.
  const char* take(size_t n) {
    const char* p = in.data() + in_pos;
    in_pos += n;
    return p;
  }
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
  void make_room_for_a_stranger();
  void read_from(Conn& c);
  void write_to(Conn& c);
  bool process(Conn& c);  // parses and executes what it can; true if it made progress
  // One parsing step each; false when it needs more bytes or the connection died.
  bool parse_step(Conn& c);
  bool parse_hello(Conn& c);
  bool skip_bytes(Conn& c);
  bool parse_header(Conn& c);
  bool parse_key(Conn& c);
  bool parse_value_length(Conn& c);
  bool parse_value(Conn& c);
  void execute(Conn& c, std::string value);
  void do_set(Conn& c, std::string value);
  void do_get(Conn& c, const std::string& value);
  void do_add(Conn& c, const std::string& value);
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
  TimePoint accept_paused_until_{};  // out of descriptors: no accept before then
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
    const bool accept_paused = Clock::now() < accept_paused_until_;
    fds.push_back({listen_fd_, static_cast<short>(accept_paused ? 0 : POLLIN), 0});
    bool have_deadline = accept_paused;
    TimePoint next_deadline = accept_paused_until_;
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
    const int timeout = have_deadline ? net::poll_ms(next_deadline) : -1;
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
  // At most a stranger cap's worth per wake: a flood must not keep the loop from serving the
  // ranks and expiring the stalled.
  for (int accepted = 0; accepted < store_detail::kMaxStrangers; ++accepted) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (net::accept_out_of_resources(errno)) accept_paused_until_ = Clock::now() + net::kAcceptBackoff;
      return;  // EAGAIN: on the next readiness
    }
    make_room_for_a_stranger();
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const uint64_t id = next_id_++;
    Conn& c = conns_[id];
    c.id = id;
    c.fd = fd;
    c.nonce = auth::random_bytes(auth::kNonceBytes);
    c.hello_by = Clock::now() + kHelloTimeout;
    c.out.assign(kStoreMagic, sizeof kStoreMagic);
    c.out += c.nonce;
  }
}

// At most store_detail::kMaxStrangers connections wait to prove they know the secret: the
// oldest is dropped for a new one. A rank answers its challenge within a round trip, so only a
// stranger that stalls (or a flood of them) ever waits long enough to be the oldest.
void Server::make_room_for_a_stranger() {
  int strangers = 0;
  Conn* oldest = nullptr;
  for (auto& [id, c] : conns_) {
    if (c.authenticated() || c.dead) continue;
    ++strangers;
    if (!oldest) oldest = &c;  // ids grow with time
  }
  if (strangers < store_detail::kMaxStrangers) return;
  close_fd(oldest->fd);  // now, not at the next reap: a flood must not pile up descriptors
  oldest->dead = true;
  ++rejected_;
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
  while (!c.dead && !c.parked && c.pending_out() < kOutCap && parse_step(c)) progress = true;
  if (c.in_pos == c.in.size()) {
    c.in.clear();
    c.in_pos = 0;
  } else if (c.in_pos > 0 && c.in_pos >= c.in.size() / 2) {
    c.in.erase(0, c.in_pos);
    c.in_pos = 0;
  }
  return progress;
}

bool Server::parse_step(Conn& c) {
  if (c.phase == Conn::Phase::hello) return parse_hello(c);
  if (c.skip > 0) return skip_bytes(c);
  switch (c.phase) {
    case Conn::Phase::header: return parse_header(c);
    case Conn::Phase::key: return parse_key(c);
    case Conn::Phase::value_length: return parse_value_length(c);
    default: return parse_value(c);
  }
}

bool Server::parse_hello(Conn& c) {
  const size_t avail = c.unparsed();
  if (avail >= sizeof kStoreMagic && std::memcmp(c.in.data() + c.in_pos, kStoreMagic, sizeof kStoreMagic) != 0) {
    c.dead = true;  // not a ringbench client of this version: no need to wait for the rest
    ++rejected_;
    return false;
  }
  return avail >= kClientHello && check_hello(c);
}

// The bytes of a rejected request.
bool Server::skip_bytes(Conn& c) {
  const size_t avail = c.unparsed();
  if (avail == 0) return false;
  const size_t n = static_cast<size_t>(std::min<uint64_t>(c.skip, avail));
  c.take(n);
  c.skip -= n;
  return true;
}

bool Server::parse_header(Conn& c) {
  if (c.unparsed() < kRequestHeader) return false;
  const char* p = c.take(kRequestHeader);
  c.op = p[0];
  c.key_length = get_u32(p + 1);
  c.rejected = false;
  c.key.clear();
  if (c.op != 'S' && c.op != 'G' && c.op != 'A') {
    c.dead = true;  // the stream cannot be trusted any more
    return false;
  }
  if (c.key_length > kMaxKey) {
    reply(c, kFailed,
          "key of " + std::to_string(c.key_length) + " bytes exceeds the limit of " +
              std::to_string(kMaxKey) + " bytes");
    c.rejected = true;
    c.skip = c.key_length;
  }
  c.phase = Conn::Phase::key;
  return true;
}

bool Server::parse_key(Conn& c) {
  if (!c.rejected) {
    if (c.unparsed() < c.key_length) return false;
    c.key.assign(c.take(c.key_length), c.key_length);
  }
  c.phase = Conn::Phase::value_length;
  return true;
}

bool Server::parse_value_length(Conn& c) {
  if (c.unparsed() < 8) return false;
  c.value_length = get_u64(c.take(8));
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
  return true;
}

bool Server::parse_value(Conn& c) {
  if (c.rejected) {
    c.phase = Conn::Phase::header;  // its bytes have been skipped
    return true;
  }
  if (c.unparsed() < c.value_length) return false;
  const size_t n = static_cast<size_t>(c.value_length);
  std::string value(c.take(n), n);
  c.phase = Conn::Phase::header;
  execute(c, std::move(value));
  return true;
}

// The client's answer to the challenge: a wrong magic or MAC closes the connection unanswered.
bool Server::check_hello(Conn& c) {
  const char* p = c.in.data() + c.in_pos;
  c.in_pos += kClientHello;
  const std::string client_nonce(p + sizeof kStoreMagic, auth::kNonceBytes);
  const std::string answer(p + sizeof kStoreMagic + auth::kNonceBytes, auth::kMacBytes);
  if (std::memcmp(p, kStoreMagic, sizeof kStoreMagic) != 0 ||
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
    do_set(c, std::move(value));
  } else if (c.op == 'G') {
    do_get(c, value);
  } else {  // 'A'
    do_add(c, value);
  }
}

void Server::do_set(Conn& c, std::string value) {
  kv_[c.key] = std::move(value);
  reply(c, kOk, {});
  wake_waiters(c.key);
}

// Answers at once when the key is there (or the GET does not wait), else parks the connection.
void Server::do_get(Conn& c, const std::string& value) {
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
}

void Server::do_add(Conn& c, const std::string& value) {
  const auto delta = static_cast<int64_t>(get_u64(value.data()));
  int64_t current = 0;
  auto it = kv_.find(c.key);
  if (it != kv_.end() && !store_detail::parse_int64(it->second, current)) {
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


// Binds addr:port (port 0 = ephemeral; "" or "*" = every address) and listens; returns the
// socket.
int listen_on(const std::string& addr, int port) {
  try {
    return net::listen_host(addr, port);
  } catch (const Error& e) {
    throw Error(std::string("store server: ") + e.what());
  }
}

int listening_port(int fd) {
  try {
    return net::bound_port(fd);
  } catch (const Error& e) {
    throw Error(std::string("store: ") + e.what());
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// TcpStoreServer

TcpStoreServer::TcpStoreServer(const std::string& addr, int port, const std::string& secret)
    : TcpStoreServer(listen_on(addr, port), secret) {}

TcpStoreServer::TcpStoreServer(int listen_fd, const std::string& secret) : secret_(secret) {
  if (listen_fd < 0) throw Error("store server: invalid listening socket");
  listen_fd_ = listen_fd;
  try {
    port_ = listening_port(listen_fd_);
    net::set_nonblocking(listen_fd_);
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

}  // namespace ringbench
