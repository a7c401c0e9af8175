#include "collectives/transport/tcp/tcp_transport.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/auth.h"
#include "base/errors.h"
#include "collectives/net.h"
#include "collectives/transport/tcp/tcp_wire.h"
#include "collectives/transport/core/transport_core.h"

namespace ringbench {
namespace {

using transport_core::Clock;
using transport_core::fmt_s;
using transport_core::seconds;
using std::chrono::milliseconds;

using namespace tcp_wire;
constexpr size_t kMaxAbortText = 4096;

struct ReqState : transport_core::ReqState {
  char* data = nullptr;
  size_t transferred = 0;  // payload bytes moved so far, for timeout messages
  struct Conn* conn = nullptr;
};
using ReqPtr = std::shared_ptr<ReqState>;

struct SendItem {
  ReqPtr req;  // null for control frames
  FrameHeader hdr{};
  const char* payload = nullptr;
  size_t payload_len = 0;
  std::string text;  // owned payload of control frames
  size_t sent = 0;   // bytes of header + payload written so far
};

struct Conn {
  int fd = -1;
  int peer = -1;
  int index = 0;
  uint32_t events = 0;  // current epoll interest
  std::deque<SendItem> sendq;
  std::deque<ReqPtr> recvq;  // posted receives, matched in order
  // kDiscard: the rest of a payload whose receive failed, read and dropped.
  enum Rx { kHeader, kAwaitingRecv, kPayload, kAbortText, kDiscard } rx = kHeader;
  FrameHeader hdr{};
  size_t got = 0;  // bytes of the current header or payload
  ReqPtr cur;
  std::string text;
  bool heartbeat_queued = false;
  bool waiter = false;  // a thread in wait() reads this socket itself; the I/O thread keeps off
  bool peer_said_bye = false;
  bool closed = false;
  Clock::time_point last_rx;
};

class TcpTransport : public transport_core::TransportCore<ReqState> {
 public:
  TcpTransport(Store& store, int rank, int size, const TcpOptions& opts);
  ~TcpTransport() override;

  std::unique_ptr<Buffer> register_buffer(void* data, size_t bytes, MemKind kind) override;
  std::unique_ptr<Request> isend(int peer, const Buffer& buf, size_t offset, size_t length,
                                 uint64_t tag) override;
  std::unique_ptr<Request> irecv(int peer, Buffer& buf, size_t offset, size_t length,
                                 uint64_t tag) override;
  void abort(const std::string& reason) noexcept override;

  bool test(const ReqPtr& r) override;
  void wait(const ReqPtr& r, milliseconds timeout) override;

 private:
  struct Peer {
    std::string addr;
    std::vector<std::unique_ptr<Conn>> conns;
    uint64_t sends = 0, recvs = 0;
  };

  void connect_mesh(Store& store);
  void accept_peers(int expected, Clock::time_point deadline);
  Conn* accept_hello(int fd, Hello& h, const std::string& nonce, Clock::time_point deadline);
  void reject(int fd, const std::string& why, bool reply, const std::string& client_nonce = "");
  void handshake(int fd, int peer, int socket_index, Clock::time_point deadline);
  HelloReply sign(HelloReply r, const std::string& client_nonce) const;
  std::string who(int peer) const override {
    return "rank " + std::to_string(peer) + " (" + peers_[peer].addr + ")";
  }

  // All below run with mu_ held.
  void io_loop();
  void on_readable(Conn& c);
  void on_writable(Conn& c);
  void on_header(Conn& c);
  void on_closed(Conn& c, const std::string& why);
  void complete(const ReqPtr& r);
  void fail(std::exception_ptr e) override;
  void update_interest(Conn& c);
  void housekeeping(Clock::time_point now);
  // A transfer posted on this socket is not done. Per socket, not per peer: frames are
  // ordered only within a socket, so a peer's goodbye on one socket can overtake its last
  // data on another.
  static bool has_pending(const Conn& c);
  bool quiet() const;  // nothing left to send, every peer said bye or closed

  TcpOptions opts_;
  int unauthenticated_ = 0;  // connections closed because they did not prove the secret
  std::vector<Peer> peers_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int waiter_wake_fd_ = -1;
  milliseconds heartbeat_;
  Clock::time_point last_heartbeat_;

  bool closing_ = false;
  std::atomic<bool> stop_{false};
  std::vector<char> discard_ = std::vector<char>(size_t{64} << 10);  // for Conn::kDiscard
  std::thread io_;
};

// ---- setup -----------------------------------------------------------------------------

TcpTransport::TcpTransport(Store& store, int rank, int size, const TcpOptions& opts)
    : TransportCore(rank, size), opts_(opts), peers_(static_cast<size_t>(size)) {
  if (opts.sockets_per_peer < 1 || opts.sockets_per_peer > 64)
    throw Error("sockets per peer must be 1..64, got " + std::to_string(opts.sockets_per_peer));
  if (opts.job_id.size() >= sizeof(Hello::job_id))
    throw Error("job id longer than 63 characters: '" + opts.job_id + "'");
  heartbeat_ = std::clamp(opts.timeout / 8, milliseconds(10), milliseconds(1000));

  std::string ip = !opts.addr.empty()    ? opts.addr
                   : !opts.iface.empty() ? net::iface_ipv4(opts.iface)
                                         : opts.default_addr;
  try {
    int port = 0;
    listen_fd_ = net::listen_tcp(ip, 0, &port);
    std::string iface = opts.iface.empty() ? net::iface_of_ipv4(ip) : opts.iface;
    caps_ = {"tcp", true, false, net::iface_speed_gbps(iface)};
    path_ = {{"transport", "tcp"},
             {"addr", ip + ":" + std::to_string(port)},
             {"iface", iface.empty() ? "?" : iface},
             {"link_gbps", caps_.link_gbps > 0 ? std::to_string(caps_.link_gbps) : "unknown"},
             {"sockets_per_peer", std::to_string(opts.sockets_per_peer)},
             {"spin_us", std::to_string(opts.spin.count())},
             {"socket_buffer", opts.socket_buffer_bytes > 0
                                   ? std::to_string(opts.socket_buffer_bytes)
                                   : std::string("autotune")}};
    peers_[rank].addr = path_["addr"];

    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    waiter_wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    check_errno(epoll_fd_ >= 0 && wake_fd_ >= 0 && waiter_wake_fd_ >= 0, "epoll/eventfd");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    check_errno(::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) == 0, "epoll_ctl");
    connect_mesh(store);
    path_["auth"] = "hmac-sha256";
    path_["unauthenticated_rejected"] = std::to_string(unauthenticated_);
  } catch (...) {
    for (auto& p : peers_)
      for (auto& c : p.conns)
        if (c && c->fd >= 0) ::close(c->fd);
    for (int fd : {listen_fd_, epoll_fd_, wake_fd_, waiter_wake_fd_})
      if (fd >= 0) ::close(fd);
    throw;
  }
  ::close(listen_fd_);
  listen_fd_ = -1;
  last_heartbeat_ = Clock::now();
  io_ = std::thread([this] { io_loop(); });
}

void TcpTransport::connect_mesh(Store& store) {
  const std::string key = opts_.key_prefix + "/addr/";
  store.set(key + std::to_string(rank_), peers_[rank_].addr);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) peers_[r].addr = store.get(key + std::to_string(r), opts_.timeout);
    peers_[r].conns.resize(static_cast<size_t>(opts_.sockets_per_peer));
  }
  const auto deadline = Clock::now() + opts_.timeout;
  const int nsock = opts_.sockets_per_peer;

  // Higher ranks connect to lower ones; accept from higher ranks on a helper thread.
  int expected = (size_ - 1 - rank_) * nsock;
  std::exception_ptr accept_error;
  std::thread acceptor([&] {
    try {
      accept_peers(expected, deadline);
    } catch (...) {
      accept_error = std::current_exception();
    }
  });

  std::exception_ptr connect_error;
  try {
    for (int r = 0; r < rank_; ++r) {
      auto [host, port] = parse_host_port(peers_[r].addr);
      for (int i = 0; i < nsock; ++i) {
        int fd = -1;
        try {
          fd = net::connect_tcp(host, port, deadline);
        } catch (const TimeoutError& e) {
          throw TimeoutError(r, me() + ": cannot connect to " + who(r) + ": " + e.what());
        }
        auto c = std::make_unique<Conn>();
        c->fd = fd;
        c->peer = r;
        c->index = i;
        peers_[r].conns[i] = std::move(c);
        handshake(fd, r, i, deadline);
      }
    }
  } catch (...) {
    connect_error = std::current_exception();
  }
  acceptor.join();
  if (connect_error) std::rethrow_exception(connect_error);
  if (accept_error) std::rethrow_exception(accept_error);

  auto now = Clock::now();
  for (auto& p : peers_)
    for (auto& c : p.conns) {
      if (!c) continue;
      net::set_nodelay(c->fd);
      net::set_socket_buffers(c->fd, opts_.socket_buffer_bytes);
      c->last_rx = now;
      epoll_event ev{};
      ev.events = c->events = EPOLLRDHUP | EPOLLET;
      ev.data.ptr = c.get();
      check_errno(::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd, &ev) == 0, "epoll_ctl");
    }
}

// The connecting side of the handshake on `fd` to `peer`: answers the challenge, then checks
// the reply's MAC, so a rank never joins a peer that lacks the job's secret.
void TcpTransport::handshake(int fd, int peer, int socket_index, Clock::time_point deadline) {
  const int r = peer;
  Challenge ch{};
  Hello h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kProtocolVersion;
  h.from_rank = static_cast<uint32_t>(rank_);
  h.to_rank = static_cast<uint32_t>(r);
  h.world_size = static_cast<uint32_t>(size_);
  h.socket_index = static_cast<uint32_t>(socket_index);
  h.sockets_per_peer = static_cast<uint32_t>(opts_.sockets_per_peer);
  std::strncpy(h.job_id, opts_.job_id.c_str(), sizeof h.job_id - 1);
  const std::string nonce = auth::random_bytes(auth::kNonceBytes);
  std::memcpy(h.nonce, nonce.data(), sizeof h.nonce);
  HelloReply reply{};
  bool in_time;
  try {
    in_time = net::read_all(fd, &ch, sizeof ch, deadline);
    if (in_time && std::memcmp(ch.magic, kMagic, sizeof kMagic) != 0)
      throw IoError(r, me() + ": " + who(r) + " is not a ringbench rank of this version (bad challenge)");
    if (in_time) {
      const std::string m = auth::mac(opts_.secret, "tcp client", std::string(ch.nonce, sizeof ch.nonce), signed_part(h));
      std::memcpy(h.mac, m.data(), sizeof h.mac);
      in_time = net::write_all(fd, &h, sizeof h, deadline) && net::read_all(fd, &reply, sizeof reply, deadline);
    }
  } catch (const IoError&) {
    throw;
  } catch (const Error& e) {
    throw IoError(r, me() + ": handshake with " + who(r) + " failed: " + e.what() +
                         " (a peer closes the connection of a rank that does not share the job's secret)");
  }
  if (!in_time) throw TimeoutError(r, me() + ": handshake with " + who(r) + " timed out");
  if (std::memcmp(reply.magic, kMagic, sizeof kMagic) != 0)
    throw IoError(r, me() + ": " + who(r) + " is not a ringbench rank (bad handshake reply)");
  if (!auth::same_mac(std::string(reply.mac, sizeof reply.mac),
                      auth::mac(opts_.secret, "tcp server", nonce, signed_part(reply))))
    throw IoError(r, me() + ": " + who(r) + " does not know the job's secret: not a rank of this job");
  if (reply.status != 0) {
    reply.message[sizeof reply.message - 1] = 0;
    throw IoError(r, me() + ": " + who(r) + " rejected our connection: " + reply.message);
  }
}

HelloReply TcpTransport::sign(HelloReply r, const std::string& client_nonce) const {
  const std::string m = auth::mac(opts_.secret, "tcp server", client_nonce, signed_part(r));
  std::memcpy(r.mac, m.data(), sizeof r.mac);
  return r;
}

// Reads and validates one handshake; returns the new connection, or null for a rejected one.
// Accepts connections from the higher ranks until `expected` have completed a valid
// handshake. Handshakes are read concurrently, so a stray client that connects and stays
// silent costs nothing but its own grace period.
void TcpTransport::accept_peers(int expected, Clock::time_point deadline) {
  struct Pending {
    int fd;
    Hello hello;
    size_t got;
    Clock::time_point deadline;
    std::string nonce;  // our challenge to it
  };
  std::vector<Pending> pending;
  for (int accepted = 0; accepted < expected;) {
    auto now = Clock::now();
    if (now >= deadline) {
      for (auto& p : pending) ::close(p.fd);
      std::string missing;
      for (int r = rank_ + 1; r < size_; ++r)
        for (auto& c : peers_[r].conns)
          if (!c) {
            missing += (missing.empty() ? "" : ", ") + who(r);
            break;
          }
      throw TimeoutError(-1, me() + ": timed out after " + fmt_s(seconds(opts_.timeout)) +
                                 " waiting for " + missing +
                                 " to connect (are they running, with the same job?)");
    }
    std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
    auto wake = deadline;
    for (auto& p : pending) {
      fds.push_back({p.fd, POLLIN, 0});
      wake = std::min(wake, p.deadline);
    }
    auto ms = std::chrono::duration_cast<milliseconds>(wake - now).count() + 1;
    if (::poll(fds.data(), fds.size(), static_cast<int>(ms)) < 0 && errno != EINTR)
      check_errno(false, me() + ": poll while accepting peers");
    now = Clock::now();
    for (size_t i = pending.size(); i-- > 0;) {
      Pending& p = pending[i];
      bool done = false;
      if (fds[i + 1].revents) {
        ssize_t n = ::recv(p.fd, reinterpret_cast<char*>(&p.hello) + p.got, sizeof p.hello - p.got, 0);
        if (n > 0) p.got += static_cast<size_t>(n);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          reject(p.fd, "closed before completing the handshake", false);
          done = true;
        } else if (p.got == sizeof p.hello) {
          if (accept_hello(p.fd, p.hello, p.nonce, deadline)) ++accepted;
          done = true;
        }
      }
      if (!done && now >= p.deadline) {
        reject(p.fd, "no handshake within the grace period", false);
        done = true;
      }
      if (done) pending.erase(pending.begin() + static_cast<long>(i));
    }
    if (fds[0].revents & POLLIN) {
      int fd;
      while ((fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
        Challenge ch{};
        std::memcpy(ch.magic, kMagic, sizeof kMagic);
        const std::string nonce = auth::random_bytes(auth::kNonceBytes);
        std::memcpy(ch.nonce, nonce.data(), sizeof ch.nonce);
        // A new socket's buffer takes 40 bytes at once; one that does not is no peer of ours.
        if (::send(fd, &ch, sizeof ch, MSG_NOSIGNAL | MSG_DONTWAIT) != ssize_t(sizeof ch)) {
          reject(fd, "could not send the challenge", false);
          continue;
        }
        pending.push_back({fd, Hello{}, 0, std::min(deadline, now + std::chrono::seconds(5)), nonce});
      }
    }
  }
  for (auto& p : pending) reject(p.fd, "all peers already connected", false);
}

void TcpTransport::reject(int fd, const std::string& why, bool reply, const std::string& client_nonce) {
  std::cerr << "ringbench " << me() << ": rejected connection from " << net::peer_address(fd)
            << ": " << why << "\n";
  if (reply) {  // only to a peer that proved the secret: it gets the reason, signed
    HelloReply r{};
    std::memcpy(r.magic, kMagic, sizeof kMagic);
    r.status = 1;
    std::strncpy(r.message, why.c_str(), sizeof r.message - 1);
    r = sign(r, client_nonce);
    try {
      net::write_all(fd, &r, sizeof r, Clock::now() + milliseconds(500));
    } catch (const Error&) {
    }
  }
  ::close(fd);
}

// Validates a complete handshake; returns the new connection, or null for a rejected one.
Conn* TcpTransport::accept_hello(int fd, Hello& h, const std::string& nonce, Clock::time_point deadline) {
  const std::string client_nonce(h.nonce, sizeof h.nonce);
  auto reject = [&](const std::string& why, bool reply) -> Conn* {
    this->reject(fd, why, reply, client_nonce);
    return nullptr;
  };
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) {
    ++unauthenticated_;
    return reject("not a ringbench peer (bad magic)", false);
  }
  // Nothing of an unauthenticated hello is acted on, or answered.
  if (!auth::same_mac(std::string(h.mac, sizeof h.mac), auth::mac(opts_.secret, "tcp client", nonce, signed_part(h)))) {
    ++unauthenticated_;
    return reject("it does not prove the job's secret (wrong MAC, or an older ringbench)", false);
  }
  h.job_id[sizeof h.job_id - 1] = 0;
  if (h.version != kProtocolVersion)
    return reject("protocol version " + std::to_string(h.version) + ", this rank speaks " +
                      std::to_string(kProtocolVersion),
                  true);
  if (opts_.job_id != h.job_id)
    return reject("job id '" + std::string(h.job_id) + "' does not match this job's '" +
                      opts_.job_id + "'",
                  true);
  if (h.world_size != static_cast<uint32_t>(size_) || h.to_rank != static_cast<uint32_t>(rank_))
    return reject("peer thinks it connects to rank " + std::to_string(h.to_rank) + " of " +
                      std::to_string(h.world_size) + ", this is rank " + std::to_string(rank_) +
                      " of " + std::to_string(size_),
                  true);
  int from = static_cast<int>(h.from_rank);
  if (from <= rank_ || from >= size_ || h.sockets_per_peer != static_cast<uint32_t>(opts_.sockets_per_peer) ||
      h.socket_index >= h.sockets_per_peer || peers_[from].conns[h.socket_index])
    return reject("unexpected or duplicate connection from rank " + std::to_string(from) +
                      " socket " + std::to_string(h.socket_index) + " of " +
                      std::to_string(h.sockets_per_peer),
                  true);
  HelloReply ok{};
  std::memcpy(ok.magic, kMagic, sizeof kMagic);
  ok = sign(ok, client_nonce);
  try {
    if (!net::write_all(fd, &ok, sizeof ok, deadline))
      return reject("handshake reply timed out", false);
  } catch (const Error& e) {
    return reject(e.what(), false);
  }
  auto c = std::make_unique<Conn>();
  c->fd = fd;
  c->peer = from;
  c->index = static_cast<int>(h.socket_index);
  Conn* raw = c.get();
  peers_[from].conns[h.socket_index] = std::move(c);
  return raw;
}

TcpTransport::~TcpTransport() {
  {
    // Say goodbye on every socket, then wait (bounded) until the frames are out and every peer
    // said goodbye too, so that no socket is closed with unread data (which would reset it).
    std::unique_lock lk(mu_);
    closing_ = true;
    // Requests still pending now will never be waited for: stop using their buffers.
    bool pending = false;
    for (auto& p : peers_)
      for (auto& c : p.conns)
        if (c && has_pending(*c)) pending = true;
    if (pending && !fatal_)
      fail(std::make_exception_ptr(
          IoError(-1, me() + ": the transport was closed with transfers still pending")));
    for (auto& p : peers_)
      for (auto& c : p.conns)
        if (c && !c->closed) {
          SendItem bye;
          bye.hdr.type = kBye;
          c->sendq.push_back(std::move(bye));
          update_interest(*c);
        }
    auto limit = std::min<milliseconds>(opts_.timeout, std::chrono::seconds(fatal_ ? 1 : 5));
    cv_.wait_for(lk, limit, [&] { return quiet(); });
  }
  stop_ = true;
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
  io_.join();
  for (auto& p : peers_)
    for (auto& c : p.conns)
      if (c && c->fd >= 0) ::close(c->fd);
  ::close(epoll_fd_);
  ::close(wake_fd_);
  ::close(waiter_wake_fd_);
}

// After a failure nobody reads data any more, so only our own frames need to get out.
bool TcpTransport::quiet() const {
  for (auto& p : peers_)
    for (auto& c : p.conns)
      if (c && !c->closed && (!c->sendq.empty() || (!c->peer_said_bye && !fatal_))) return false;
  return true;
}

// ---- posting ---------------------------------------------------------------------------

std::unique_ptr<Buffer> TcpTransport::register_buffer(void* data, size_t bytes, MemKind kind) {
  if (kind != MemKind::host)
    throw Error("the tcp transport takes host memory only: stage device buffers through "
                "pinned host memory");
  return std::make_unique<Buffer>(data, bytes, kind);
}

std::unique_ptr<Request> TcpTransport::isend(int peer, const Buffer& buf, size_t offset,
                                             size_t length, uint64_t tag) {
  check_args(peer, buf, offset, length);
  auto r = std::make_shared<ReqState>();
  r->peer = peer;
  r->is_send = true;
  r->length = length;
  r->tag = tag;
  std::lock_guard lk(mu_);
  if (fatal_) std::rethrow_exception(fatal_);
  Peer& p = peers_[peer];
  Conn& c = *p.conns[p.sends++ % p.conns.size()];
  if (c.closed || c.peer_said_bye)
    throw IoError(peer, me() + ": cannot send to " + who(peer) + ": it has left the job");
  r->conn = &c;
  SendItem item;
  item.req = r;
  item.hdr = {kData, 0, tag, length};
  item.payload = static_cast<const char*>(buf.data()) + offset;
  item.payload_len = length;
  c.sendq.push_back(std::move(item));
  if (c.sendq.size() == 1) on_writable(c);  // try at once: saves a wake-up of the I/O thread
  update_interest(c);
  return make_request(r);
}

std::unique_ptr<Request> TcpTransport::irecv(int peer, Buffer& buf, size_t offset,
                                             size_t length, uint64_t tag) {
  check_args(peer, buf, offset, length);
  auto r = std::make_shared<ReqState>();
  r->peer = peer;
  r->data = static_cast<char*>(buf.data()) + offset;
  r->length = length;
  r->tag = tag;
  std::lock_guard lk(mu_);
  if (fatal_) std::rethrow_exception(fatal_);
  Peer& p = peers_[peer];
  Conn& c = *p.conns[p.recvs++ % p.conns.size()];
  if (c.closed || c.peer_said_bye)
    throw IoError(peer, me() + ": cannot receive from " + who(peer) + ": it has left the job");
  r->conn = &c;
  c.recvq.push_back(r);
  if (c.rx == Conn::kAwaitingRecv) on_header(c);  // a frame was waiting for this receive
  update_interest(c);
  return make_request(r);
}

void TcpTransport::abort(const std::string& reason) noexcept {
  try {
    std::lock_guard lk(mu_);
    if (!fatal_) fail(std::make_exception_ptr(IoError(-1, me() + " aborted: " + reason)));
    std::string text = reason.substr(0, kMaxAbortText);
    for (auto& p : peers_)
      for (auto& c : p.conns) {
        if (!c || c->closed) continue;
        // Finish a half-written frame (the stream must stay parseable), drop the rest.
        // (front() of an empty queue is undefined: check emptiness first.)
        while (c->sendq.size() > (!c->sendq.empty() && c->sendq.front().sent > 0 ? 1u : 0u))
          c->sendq.pop_back();
        c->heartbeat_queued =
            !c->sendq.empty() && c->sendq.front().hdr.type == kHeartbeat;
        SendItem item;
        item.hdr = {kAbort, 0, 0, text.size()};
        item.text = text;
        c->sendq.push_back(std::move(item));
        update_interest(*c);
      }
  } catch (...) {
  }
}

// ---- completion ------------------------------------------------------------------------

bool TcpTransport::test(const ReqPtr& r) {
  std::lock_guard lk(mu_);
  Conn& c = *r->conn;
  if (r->status == ReqState::kPending && !r->is_send && !c.waiter && !c.closed)
  {
    on_readable(c);  // a receive progresses when its owner asks (see update_interest)
    update_interest(c);
  }
  if (r->status == ReqState::kFailed) std::rethrow_exception(r->error);
  return r->status == ReqState::kDone;
}

void TcpTransport::wait(const ReqPtr& r, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::unique_lock lk(mu_);
  while (r->status == ReqState::kPending && Clock::now() < deadline) {
    Conn& c = *r->conn;
    if (r->is_send || c.closed || c.waiter || c.rx == Conn::kAwaitingRecv || fatal_) {
      cv_.wait_until(lk, deadline);
      continue;
    }
    // Read the socket in this thread rather than have the I/O thread read it and then wake
    // this one: one wake-up per message instead of two, and the data lands in this core's
    // cache right before it is reduced.
    c.waiter = true;
    update_interest(c);
    // Spin briefly (yielding the core) before sleeping: waking a sleeping thread costs tens of
    // microseconds, more than most small-message hops take.
    for (auto spin_end = Clock::now() + opts_.spin; Clock::now() < spin_end;) {
      on_readable(c);
      if (r->status != ReqState::kPending || c.closed || fatal_) break;
      lk.unlock();
      sched_yield();
      lk.lock();
    }
    if (r->status != ReqState::kPending || c.closed || fatal_) {
      c.waiter = false;
      cv_.notify_all();  // another thread may be waiting for this socket to be free
      update_interest(c);
      continue;
    }
    lk.unlock();
    pollfd fds[2] = {{c.fd, POLLIN, 0}, {waiter_wake_fd_, POLLIN, 0}};
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()) + milliseconds(1);
    int n = ::poll(fds, 2, static_cast<int>(std::min(left, heartbeat_).count()));
    lk.lock();
    c.waiter = false;
    if (n > 0 && fds[0].revents && !c.closed) on_readable(c);
    cv_.notify_all();  // another thread may be waiting for this socket to be free
    update_interest(c);
  }
  if (r->status == ReqState::kFailed) std::rethrow_exception(r->error);
  if (r->status == ReqState::kDone) return;
  double heard = 1e9;
  for (auto& c : peers_[r->peer].conns) heard = std::min(heard, seconds(Clock::now() - c->last_rx));
  throw transport_core::timeout_error(me(), who(r->peer), *r, timeout, heard, opts_.timeout,
                                     " (" + std::to_string(r->transferred) + " moved)", r->transferred > 0);
}

void TcpTransport::complete(const ReqPtr& r) {
  r->status = ReqState::kDone;
  cv_.notify_all();
}

// The first failure wins; every pending request fails with it.
void TcpTransport::fail(std::exception_ptr e) {
  if (!fatal_) {
    fatal_ = e;
    uint64_t one = 1;  // wakes threads polling a socket in wait(); never drained
    [[maybe_unused]] auto n = ::write(waiter_wake_fd_, &one, sizeof one);
  }
  auto fail_req = [&](const ReqPtr& r) {
    if (r && r->status == ReqState::kPending) {
      r->status = ReqState::kFailed;
      r->error = fatal_;
    }
  };
  for (auto& p : peers_)
    for (auto& c : p.conns) {
      if (!c) continue;
      for (auto& item : c->sendq) fail_req(item.req);
      for (auto& r : c->recvq) fail_req(r);
      fail_req(c->cur);
      c->recvq.clear();
      // A failed request is over for its caller, who may free or reuse the buffer at once: stop
      // touching caller memory. Drop the data frames not yet started, send the rest of a
      // half-written one from a copy (the stream must stay parseable), and discard the rest of
      // a payload being received.
      std::erase_if(c->sendq, [](const SendItem& i) { return i.req && i.sent == 0; });
      for (auto& item : c->sendq)
        if (item.req) {
          item.text.assign(item.payload, item.payload_len);
          item.req.reset();
        }
      if (c->cur) {
        c->cur.reset();
        c->rx = Conn::kDiscard;
      }
    }
  cv_.notify_all();
}

bool TcpTransport::has_pending(const Conn& c) {
  return !c.recvq.empty() || c.cur ||
         std::any_of(c.sendq.begin(), c.sendq.end(), [](const SendItem& i) { return i.req; });
}

// ---- I/O thread ------------------------------------------------------------------------

void TcpTransport::update_interest(Conn& c) {
  if (c.closed) return;
  // The I/O thread only writes (what an inline send left over). Receives are read by the
  // thread that waits for them (one wake-up per message instead of two, and the data lands in
  // the cache of the core that reduces it), by test(), and by the heartbeat housekeeping,
  // which also sees control frames and closes on sockets nobody waits on. epoll reports
  // hang-ups and errors regardless.
  // Edge-triggered, so a close behind data nobody has asked for yet is reported once, not in
  // a loop; on_writable() writes until EAGAIN, as edge triggering requires.
  uint32_t want = EPOLLRDHUP | EPOLLET | (c.sendq.empty() ? 0u : uint32_t{EPOLLOUT});
  if (want == c.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.ptr = &c;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
  c.events = want;
}

void TcpTransport::io_loop() {
  epoll_event events[64];
  while (!stop_) {
    int n = ::epoll_wait(epoll_fd_, events, 64, static_cast<int>(heartbeat_.count()));
    std::lock_guard lk(mu_);
    for (int i = 0; i < n; ++i) {
      auto* c = static_cast<Conn*>(events[i].data.ptr);
      if (!c) {
        uint64_t v;
        [[maybe_unused]] auto r = ::read(wake_fd_, &v, sizeof v);
        continue;
      }
      if (c->closed) continue;
      if (c->waiter) {
        // a waiting thread reads this socket (and sees its errors) itself
      } else if ((events[i].events & (EPOLLHUP | EPOLLERR)) && c->rx == Conn::kAwaitingRecv) {
        on_closed(*c, "reset the connection");  // epoll reports it until the fd is gone
      } else if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        on_readable(*c);  // the peer closed: read what it sent last (an abort, a goodbye)
      }
      if (!c->closed && (events[i].events & EPOLLOUT)) on_writable(*c);
      update_interest(*c);
    }
    housekeeping(Clock::now());
    if (closing_ && quiet()) cv_.notify_all();
  }
}

void TcpTransport::housekeeping(Clock::time_point now) {
  bool beat = now - last_heartbeat_ >= heartbeat_;
  if (beat) last_heartbeat_ = now;
  for (auto& p : peers_)
    for (auto& c : p.conns) {
      if (!c || c->closed || c->peer_said_bye) continue;
      if (beat && !c->heartbeat_queued && !closing_) {
        SendItem hb;
        hb.hdr.type = kHeartbeat;
        c->heartbeat_queued = true;
        c->sendq.push_back(std::move(hb));
        if (c->sendq.size() == 1) on_writable(*c);
        update_interest(*c);
      }
      // Receives that nobody waits on are read here now and then, so that their heartbeats
      // are seen (a socket nobody reads would look silent). A socket we stopped reading (a
      // frame waiting for its receive) proves nothing either way.
      if (!beat) continue;
      if (!c->waiter && c->rx != Conn::kAwaitingRecv) {
        on_readable(*c);
        update_interest(*c);
      }
      if (c->closed) continue;
      // Bytes waiting in the socket mean the peer did speak: only this process was slow.
      int unread = 0;
      if (c->rx != Conn::kAwaitingRecv && now - c->last_rx > opts_.timeout && !fatal_ &&
          ::ioctl(c->fd, FIONREAD, &unread) == 0 && unread == 0) {
        fail(std::make_exception_ptr(IoError(
            c->peer, me() + ": " + who(c->peer) + " sent nothing, not even a heartbeat, for " +
                         fmt_s(seconds(now - c->last_rx)) +
                         " (timeout " + fmt_s(seconds(opts_.timeout)) +
                         "): the process is stopped or hung, or the network is down")));
      }
    }
}

void TcpTransport::on_closed(Conn& c, const std::string& why) {
  bool graceful = c.peer_said_bye;
  c.closed = true;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  if (!fatal_ && (!graceful || has_pending(c)))
    fail(std::make_exception_ptr(IoError(
        c.peer, me() + ": " + who(c.peer) + " " + why +
                    (graceful ? " while a transfer with it was pending"
                              : ": the process died or was killed"))));
  c.sendq.clear();  // its requests failed above, or it held only control frames
  cv_.notify_all();
}

void TcpTransport::on_readable(Conn& c) {
  for (;;) {
    char* dst;
    size_t want;
    switch (c.rx) {
      case Conn::kHeader:
        dst = reinterpret_cast<char*>(&c.hdr) + c.got;
        want = sizeof c.hdr - c.got;
        break;
      case Conn::kPayload:
        dst = c.cur->data + c.got;
        want = c.cur->length - c.got;
        break;
      case Conn::kAbortText:
        dst = c.text.data() + c.got;
        want = c.text.size() - c.got;
        break;
      case Conn::kDiscard:
        dst = discard_.data();
        want = std::min<uint64_t>(discard_.size(), c.hdr.length - c.got);
        break;
      case Conn::kAwaitingRecv:
      default:
        return;
    }
    ssize_t n = ::recv(c.fd, dst, want, 0);
    if (n == 0) return on_closed(c, "closed the connection");
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      return on_closed(c, std::string("reset the connection (") + std::strerror(errno) + ")");
    }
    c.last_rx = Clock::now();
    c.got += static_cast<size_t>(n);
    if (c.rx == Conn::kPayload) c.cur->transferred = c.got;
    if (c.got < sizeof c.hdr && c.rx == Conn::kHeader) continue;
    if (c.rx == Conn::kHeader) {
      c.got = 0;
      on_header(c);
    } else if (c.rx == Conn::kPayload && c.got == c.cur->length) {
      complete(c.cur);
      c.cur.reset();
      c.rx = Conn::kHeader;
      c.got = 0;
    } else if (c.rx == Conn::kDiscard && c.got == c.hdr.length) {
      c.rx = Conn::kHeader;
      c.got = 0;
    } else if (c.rx == Conn::kAbortText && c.got == c.text.size()) {
      c.rx = Conn::kHeader;
      c.got = 0;
      if (!fatal_)
        fail(std::make_exception_ptr(IoError(c.peer, me() + ": " + who(c.peer) +
                                                         " aborted: " + c.text)));
    }
    if (c.closed) return;
  }
}

// A complete header is in c.hdr.
void TcpTransport::on_header(Conn& c) {
  c.got = 0;
  switch (c.hdr.type) {
    case kHeartbeat:
      c.rx = Conn::kHeader;
      return;
    case kBye:
      c.peer_said_bye = true;
      c.rx = Conn::kHeader;
      if (has_pending(c) && !fatal_)
        fail(std::make_exception_ptr(IoError(
            c.peer, me() + ": " + who(c.peer) + " left the job while a transfer was pending")));
      cv_.notify_all();
      return;
    case kAbort:
      c.text.assign(std::min<uint64_t>(c.hdr.length, kMaxAbortText), '\0');
      c.rx = c.text.empty() ? Conn::kHeader : Conn::kAbortText;
      if (c.text.empty() && !fatal_)
        fail(std::make_exception_ptr(IoError(c.peer, me() + ": " + who(c.peer) + " aborted")));
      return;
    case kData:
      break;
    default:
      c.rx = Conn::kHeader;
      fail(std::make_exception_ptr(IoError(
          c.peer, me() + ": corrupt stream from " + who(c.peer) + " (frame type " +
                      std::to_string(c.hdr.type) + ")")));
      return;
  }
  if (fatal_) {  // nobody will consume it; stop reading this socket
    c.rx = Conn::kAwaitingRecv;
    return;
  }
  if (c.recvq.empty()) {
    c.rx = Conn::kAwaitingRecv;  // resumed by irecv(); TCP flow control holds the sender
    return;
  }
  ReqPtr r = std::move(c.recvq.front());
  c.recvq.pop_front();
  if (c.hdr.length != r->length || c.hdr.tag != r->tag) {
    c.rx = Conn::kAwaitingRecv;
    c.recvq.push_front(r);
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  " sent a %llu-byte message with tag %016llx where this rank expects %zu bytes "
                  "with tag %016llx",
                  static_cast<unsigned long long>(c.hdr.length),
                  static_cast<unsigned long long>(c.hdr.tag), r->length,
                  static_cast<unsigned long long>(r->tag));
    fail(std::make_exception_ptr(IoError(c.peer, me() + ": " + who(c.peer) + buf +
                                                     ": the ranks disagree on the operation")));
    return;
  }
  if (r->length == 0) {
    complete(r);
    c.rx = Conn::kHeader;
    return;
  }
  c.cur = std::move(r);
  c.rx = Conn::kPayload;
}

void TcpTransport::on_writable(Conn& c) {
  while (!c.sendq.empty()) {
    SendItem& it = c.sendq.front();
    iovec iov[2];
    int cnt = 0;
    const size_t hsz = sizeof it.hdr;
    const char* payload = it.req ? it.payload : it.text.data();
    size_t plen = it.req ? it.payload_len : it.text.size();
    if (it.sent < hsz)
      iov[cnt++] = {reinterpret_cast<char*>(&it.hdr) + it.sent, hsz - it.sent};
    size_t poff = it.sent > hsz ? it.sent - hsz : 0;
    if (plen > poff) iov[cnt++] = {const_cast<char*>(payload) + poff, plen - poff};
    if (cnt > 0) {
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(cnt);
      ssize_t n = ::sendmsg(c.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return;
        std::string why = std::string("reset the connection (") + std::strerror(errno) + ")";
        on_readable(c);  // an abort it sent before closing explains more than the reset
        if (!c.closed) on_closed(c, why);
        return;
      }
      it.sent += static_cast<size_t>(n);
      if (it.req && it.sent > hsz) it.req->transferred = it.sent - hsz;
      if (it.sent < hsz + plen) continue;
    }
    if (it.hdr.type == kHeartbeat) c.heartbeat_queued = false;
    if (it.req) complete(it.req);
    c.sendq.pop_front();
  }
}

}  // namespace

std::unique_ptr<Transport> make_tcp_transport(Store& store, int rank, int size,
                                              const TcpOptions& opts) {
  return std::make_unique<TcpTransport>(store, rank, size, opts);
}

}  // namespace ringbench
