// The TCP transport's life (construction, closing), posting and completion; make_tcp_transport.
#include "collectives/transport/tcp/tcp_transport.h"

#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "base/errors.h"
#include "collectives/net.h"
#include "collectives/transport/tcp/tcp_internal.h"

namespace ringbench {
namespace tcp_detail {

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

TcpTransport::~TcpTransport() {
  {
    // Say goodbye on every socket, then wait (bounded) until the frames are out and every peer
    // said goodbye too, so that no socket is closed with unread data (which would reset it).
    std::unique_lock lk(mu_);
    closing_ = true;
    bool pending = false;
    for (auto& p : peers_)
      for (auto& c : p.conns)
        if (c && has_pending(*c)) pending = true;
    fail_pending_at_close(pending);
    for (auto& p : peers_)
      for (auto& c : p.conns)
        if (c && !c->closed) {
          SendItem bye;
          bye.hdr.type = kBye;
          c->sendq.push_back(std::move(bye));
          update_interest(*c);
        }
    await_goodbyes(lk, opts_.timeout, [&] { return quiet(); });
  }
  stop_ = true;
  transport_core::signal_eventfd(wake_fd_);
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

// A peer's sends take its sockets in turn, and so do its receives.
void TcpTransport::post(const ReqPtr& r) {
  Peer& p = peers_[r->peer];
  Conn& c = *p.conns[(r->is_send ? p.sends++ : p.recvs++) % p.conns.size()];
  if (c.closed || c.peer_said_bye) throw left_job(*r);
  r->conn = &c;
  if (r->is_send) {
    SendItem item;
    item.req = r;
    item.hdr = {kData, 0, r->tag, r->length};
    item.payload = r->data;
    item.payload_len = r->length;
    c.sendq.push_back(std::move(item));
    if (c.sendq.size() == 1) on_writable(c);  // try at once: saves a wake-up of the I/O thread
  } else {
    c.recvq.push_back(r);
    if (c.rx == Conn::kAwaitingRecv) on_header(c);  // a frame was waiting for this receive
  }
  update_interest(c);
}

void TcpTransport::publish_abort(const std::string& reason) {
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
}

// ---- completion ------------------------------------------------------------------------

// A receive progresses when its owner asks (see update_interest).
void TcpTransport::advance(ReqState& r) {
  Conn& c = *r.conn;
  if (r.is_send || c.waiter || c.closed) return;
  on_readable(c);
  update_interest(c);
}

void TcpTransport::await(std::unique_lock<std::mutex>& lk, ReqState& r, Clock::time_point deadline) {
  while (r.status == ReqState::kPending && Clock::now() < deadline) {
    Conn& c = *r.conn;
    if (r.is_send || c.closed || c.waiter || c.rx == Conn::kAwaitingRecv || fatal_) {
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
      if (r.status != ReqState::kPending || c.closed || fatal_) break;
      lk.unlock();
      sched_yield();
      lk.lock();
    }
    if (r.status != ReqState::kPending || c.closed || fatal_) {
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
}

TimeoutError TcpTransport::timed_out(const ReqState& r, milliseconds waited) const {
  double heard = 1e9;
  for (auto& c : peers_[r.peer].conns) heard = std::min(heard, seconds(Clock::now() - c->last_rx));
  return transport_core::timeout_error(me(), who(r.peer), r, waited, heard, opts_.timeout,
                                       " (" + std::to_string(r.transferred) + " moved)", r.transferred > 0);
}

void TcpTransport::complete(const ReqPtr& r) {
  r->status = ReqState::kDone;
  cv_.notify_all();
}

// The first failure wins; every pending request fails with it.
void TcpTransport::fail(std::exception_ptr e) {
  if (!fatal_) {
    fatal_ = e;
    transport_core::signal_eventfd(waiter_wake_fd_);  // wakes threads polling a socket in wait()
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

}  // namespace tcp_detail

std::unique_ptr<Transport> make_tcp_transport(Store& store, int rank, int size,
                                              const TcpOptions& opts) {
  return std::make_unique<tcp_detail::TcpTransport>(store, rank, size, opts);
}

}  // namespace ringbench
