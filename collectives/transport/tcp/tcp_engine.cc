// The TCP transport's I/O engine: the epoll thread, heartbeats, reading and writing frames.
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/errors.h"
#include "collectives/transport/tcp/tcp_internal.h"

namespace ringbench::tcp_detail {

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
  // While closing, the peer's goodbye is what the destructor waits for: read as it arrives
  // (EPOLLIN), not at the next heartbeat's housekeeping, which made every close take up to a
  // heartbeat (1 s) for nothing.
  uint32_t want = EPOLLRDHUP | EPOLLET | (closing_ ? uint32_t{EPOLLIN} : 0u) |
                  (c.sendq.empty() ? 0u : uint32_t{EPOLLOUT});
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

}  // namespace ringbench::tcp_detail
