// The shm transport's progress engine: messages through the rings, single-copy reads, waiting.
#include <sched.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "base/errors.h"
#include "collectives/transport/shm/shm_internal.h"

namespace ringbench::shm_detail {

// ---- progress ------------------------------------------------------------------------------

// Moves every pending transfer as far as it goes; true when anything moved.
bool ShmTransport::progress() {
  bool moved = false;
  for (auto& p : peers_) {
    if (fatal_) return false;
    if (!p.hdr) continue;
    check_flags(p);  // before the rings: data a peer wrote before its goodbye is seen below
    if (!fatal_ && !p.sendq.empty()) moved |= pump_out(p);
    if (!fatal_ && !p.unacked.empty()) moved |= collect_acks(p);
    if (!fatal_) moved |= pump_in(p);
    if (!fatal_ && p.said_bye) check_left(p);
  }
  return moved;
}

bool ShmTransport::pump_out(Peer& p) {
  bool moved = false;
  while (!p.sendq.empty() && !fatal_) {
    SendItem& it = p.sendq.front();
    ReqState& r = *it.req;
    const bool single_copy = it.hdr.magic == kFrameMagicCma;
    const size_t total = kFrameBytes + (single_copy ? 0 : r.length);
    // A forward's payload goes out as it arrives (what pump_in could not write in at once).
    const size_t limit = r.forwarded ? kFrameBytes + r.fwd_ready : total;
    while (it.sent < limit) {
      const size_t n = it.sent < kFrameBytes
                           ? p.out.write(reinterpret_cast<const char*>(&it.hdr) + it.sent, kFrameBytes - it.sent)
                           : p.out.write(r.data + (it.sent - kFrameBytes), std::min(limit - it.sent, kPublishBytes));
      if (n == kCorrupt) {
        corrupt(p, "its ring's tail is outside the ring");
        return moved;
      }
      if (n == 0) break;
      it.sent += n;
      if (it.sent == total && !single_copy) p.out.pad(r.length);  // before any publish
      r.transferred = it.sent > kFrameBytes ? it.sent - kFrameBytes : 0;
      moved = true;
      if (p.out.unpublished() >= kPublishBytes) {
        p.out.publish();
        ring_bell(*p.hdr);
      }
    }
    if (it.sent < total) break;
    if (single_copy) {
      p.unacked.push_back(std::move(it.req));
      ++p.cma_sent;
    } else {
      complete(it.req);
    }
    p.sendq.pop_front();
  }
  if (p.out.unpublished() > 0) {
    p.out.publish();
    ring_bell(*p.hdr);
  }
  return moved;
}

bool ShmTransport::pump_in(Peer& p) {
  bool moved = false;
  while (!fatal_) {
    if (p.rx == Peer::kAwaitingRecv) {
      if (p.recvq.empty() || !match(p)) break;
      moved = true;
      continue;
    }
    if (p.rx == Peer::kHeader) {
      const size_t before = p.got;
      if (!read_header(p)) {
        moved |= p.got != before;
        break;
      }
      moved = true;
      continue;
    }
    ReqState& r = *p.cur;  // kPayload
    const size_t n = read_payload(p, r);
    if (n == kCorrupt) return moved;  // failed
    if (n == 0) break;
    moved = true;
    p.got += n;
    r.transferred = p.got;
    const bool whole = p.got == r.length;
    if (whole && !p.rx_cma) p.in.pad(r.length);
    if (p.in.unpublished() >= kPublishBytes) {
      p.in.publish();
      ring_bell(*p.hdr);  // the writer may be waiting for room
    }
    if (whole) {
      if (p.rx_cma) ack(p);
      complete(p.cur);
      p.cur.reset();
      p.rx = Peer::kHeader;
      p.got = 0;
    }
  }
  if (p.in.unpublished() > 0) {
    p.in.publish();
    ring_bell(*p.hdr);
  }
  publish_fused();
  return moved;
}

// Reads (the rest of) a frame header; true once it is complete and valid (then kAwaitingRecv).
bool ShmTransport::read_header(Peer& p) {
  const size_t n = p.in.read(reinterpret_cast<char*>(&p.rx_hdr) + p.got, kFrameBytes - p.got);
  if (n == kCorrupt) {
    corrupt(p, "its ring's head is outside the ring");
    return false;
  }
  p.got += n;
  if (p.got < kFrameBytes) return false;
  p.rx_cma = p.rx_hdr.magic == kFrameMagicCma;
  if ((p.rx_hdr.magic != kFrameMagic && !(p.rx_cma && p.cma_in)) || p.rx_hdr.seq != p.recv_seq) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "message %u has magic %08x and number %u", p.recv_seq, p.rx_hdr.magic,
                  p.rx_hdr.seq);
    corrupt(p, buf);
    return false;
  }
  ++p.recv_seq;
  p.got = 0;
  p.rx = Peer::kAwaitingRecv;
  return true;
}

// Pairs the message whose header was read with the oldest posted receive; false on a mismatch.
bool ShmTransport::match(Peer& p) {
  ReqPtr r = p.recvq.front();
  if (p.rx_hdr.length != r->length || p.rx_hdr.tag != r->tag) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  " sent a %llu-byte message with tag %016llx where this rank expects %zu bytes with tag %016llx",
                  static_cast<unsigned long long>(p.rx_hdr.length), static_cast<unsigned long long>(p.rx_hdr.tag),
                  r->length, static_cast<unsigned long long>(r->tag));
    fail(std::make_exception_ptr(
        IoError(p.rank, me() + ": " + who(p.rank) + buf + ": the ranks disagree on the operation")));
    return false;
  }
  p.recvq.pop_front();
  p.got = 0;
  if (r->length == 0) {
    if (p.rx_cma) ack(p);
    complete(r);
    p.rx = Peer::kHeader;
  } else {
    p.cur = std::move(r);
    p.rx = Peer::kPayload;
  }
  return true;
}

// The next piece of the current payload: from the ring, or (single-copy) from the sender's
// memory, into the receive's buffer or its sink. Returns the bytes read, or kCorrupt once the
// transport failed.
size_t ShmTransport::read_payload(Peer& p, ReqState& r) {
  if (r.forward) return forward_payload(p, r);
  if (r.sink) return sink_payload(p, r);
  if (p.rx_cma) return read_cma(p, r.data + p.got, std::min(r.length - p.got, kCmaPieceBytes));
  const size_t n = p.in.read(r.data + p.got, std::min(r.length - p.got, kPublishBytes));
  if (n == kCorrupt) corrupt(p, "its ring's head is outside the ring");
  return n;
}

// The next piece of the current payload, where a sink or a forward can take it: in the ring
// (peeked, to consume once taken), or (single-copy) read out of the sender into the bounce
// buffer. A count of kCorrupt once the transport failed.
std::pair<const char*, size_t> ShmTransport::next_piece(Peer& p, const ReqState& r) {
  if (p.rx_cma) {
    p.bounce.resize(kCmaPieceBytes);
    return {p.bounce.data(), read_cma(p, p.bounce.data(), std::min(r.length - p.got, kCmaPieceBytes))};
  }
  const auto piece = p.in.peek(std::min(r.length - p.got, kPublishBytes));
  if (piece.second == kCorrupt) corrupt(p, "its ring's head is outside the ring");
  return piece;
}

// A sink takes the payload where it lies in the ring (no copy).
size_t ShmTransport::sink_payload(Peer& p, ReqState& r) {
  const auto piece = next_piece(p, r);  // no structured binding: lambdas capture these
  const char* bytes = piece.first;
  const size_t n = piece.second;
  if (n == kCorrupt || n == 0) return n;
  if (!hand_over(p, "consumed", [&] { r.sink(bytes, n); })) return kCorrupt;
  if (!p.rx_cma) p.in.consume(n);
  return n;
}

// A forward's next piece goes straight into the next rank's ring when its send is first in line
// there, caught up, and the ring has room; else into home, for pump_out to send from there: a
// full ring never stops the receive, so ranks that all forward to each other cannot deadlock.
size_t ShmTransport::forward_payload(Peer& p, ReqState& r) {
  ReqState& send = *r.fwd_send;
  const auto piece = next_piece(p, r);
  const char* bytes = piece.first;
  const size_t n = piece.second;
  if (n == kCorrupt || n == 0) return n;
  Peer& q = peers_[send.peer];
  if (!can_fuse(q, send)) pump_out(q);  // its header, or what waits in home, may go out now
  if (fatal_) return kCorrupt;
  char* next = nullptr;
  size_t m = n;
  if (can_fuse(q, send)) {
    const auto [dst, room] = q.out.space(n);
    if (room == kCorrupt) {
      corrupt(q, "its ring's tail is outside the ring");
      return kCorrupt;
    }
    // Positions are aligned, so a piece shorter than the rest of the payload is too. A
    // single-copy piece, read out of the sender whole, goes in whole or into home.
    if (room == n)
      next = dst;
    else if (room >= kAlign && !p.rx_cma)
      next = dst, m = room / kAlign * kAlign;
  }
  if (!hand_over(p, "forwarded", [&] { r.forward(bytes, p.got, m, next); })) return kCorrupt;
  if (!p.rx_cma) p.in.consume(m);
  send.fwd_ready += m;
  if (next) {
    q.out.commit(m);
    q.sendq.front().sent += m;
    if (send.fwd_ready == send.length) q.out.pad(send.length);
    fused_to_ = &q;
    if (q.out.unpublished() >= kPublishBytes || send.fwd_ready == send.length) publish_fused();
  }
  return m;
}

// The forward's send is first in line at q, its header is out, and nothing waits in home.
bool ShmTransport::can_fuse(Peer& q, const ReqState& send) const {
  return !q.sendq.empty() && q.sendq.front().req.get() == &send &&
         q.sendq.front().sent == kFrameBytes + send.fwd_ready;
}

// Publishes what forwards wrote straight into a peer's ring; its send completes in pump_out.
void ShmTransport::publish_fused() {
  if (!fused_to_) return;
  Peer& q = *fused_to_;
  fused_to_ = nullptr;
  q.out.publish();
  ring_bell(*q.hdr);
  if (!q.sendq.empty() && !fatal_) pump_out(q);
}

// Hands a piece to a receive's sink or forward function (`take`); one that throws fails the
// transport, naming the sender.
bool ShmTransport::hand_over(Peer& p, const char* failed, const std::function<void()>& take) {
  std::string why;
  try {
    take();
    return true;
  } catch (const std::exception& e) {
    why = std::string(": ") + e.what();
  } catch (...) {
  }
  fail(std::make_exception_ptr(IoError(p.rank, me() + ": a message from " + who(p.rank) + " could not be " + failed + why)));
  return false;
}

// Reads up to `want` bytes of the current single-copy payload out of the sender's memory.
size_t ShmTransport::read_cma(Peer& p, char* dst, size_t want) {
  iovec local{dst, want};
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(p.rx_hdr.addr + p.got)), want};
  const ssize_t n = ::process_vm_readv(static_cast<pid_t>(p.proc.pid), &local, 1, &remote, 1, 0);
  const int err = errno;
  // A sender that failed revokes its single-copy messages (publish_abort) before their buffers
  // may be freed: a piece read before the revocation was seen is what the sender meant, one read
  // after it may not be, so the message is dropped with the sender's reason.
  if (p.hdr->flags.load(std::memory_order_acquire) & kAborted) {
    check_flags(p);
    return kCorrupt;
  }
  if (n > 0) return static_cast<size_t>(n);
  errno = err;
  fail(std::make_exception_ptr(IoError(p.rank, me() + ": cannot read a message out of the memory of " + who(p.rank) +
                                                   " (process_vm_readv: " + std::strerror(errno) + ")")));
  return kCorrupt;
}

// Tells the sender its single-copy message has been read: its send completes, its buffer is free.
void ShmTransport::ack(Peer& p) {
  p.in_ctl->acked.store(++p.cma_read, std::memory_order_release);
  ring_bell(*p.hdr);
}

// Completes the single-copy sends the receiver has read; true when any completed.
bool ShmTransport::collect_acks(Peer& p) {
  const uint64_t acked = p.out_ctl->acked.load(std::memory_order_acquire);
  if (acked > p.cma_sent || acked < p.cma_done) {
    corrupt(p, "it acknowledged " + std::to_string(acked) + " single-copy messages of " + std::to_string(p.cma_sent));
    return false;
  }
  const bool moved = acked > p.cma_done;
  for (; p.cma_done < acked; ++p.cma_done) {
    complete(p.unacked.front());
    p.unacked.pop_front();
  }
  return moved;
}

void ShmTransport::corrupt(Peer& p, const std::string& what) {
  fail(std::make_exception_ptr(IoError(
      p.rank, me() + ": corrupt shared-memory ring with " + who(p.rank) + ": " + what)));
}

// ---- completion ----------------------------------------------------------------------------

void ShmTransport::await(std::unique_lock<std::mutex>& lk, ReqState& r, Clock::time_point deadline) {
  auto spin_end = Clock::now() + opts_.spin;
  while (r.status == ReqState::kPending) {
    // Spin while data flows; sleep once nothing has moved for `spin`.
    if (progress()) spin_end = Clock::now() + opts_.spin;
    const auto now = Clock::now();
    if (r.status != ReqState::kPending || now >= deadline) break;
    if (now < spin_end) {
      lk.unlock();
      sched_yield();
      lk.lock();
    } else {
      sleep(lk, r, std::min(deadline, now + heartbeat_));
    }
  }
}

TimeoutError ShmTransport::timed_out(const ReqState& r, milliseconds waited) const {
  const Peer& p = peers_[r.peer];
  return transport_core::timeout_error(me(), who(r.peer), r, waited, seconds(Clock::now() - p.beat_at),
                                       opts_.timeout, " (" + std::to_string(r.transferred) + " moved)",
                                       r.transferred > 0);
}

// Sleeps on our doorbell until a peer rings it, `until`, or a failure. We announce ourselves in
// `sleepers`, then look at the rings once more: a peer that published before our announcement
// is seen by that look, one that published after it sees us and rings (see ring_bell()).
void ShmTransport::sleep(std::unique_lock<std::mutex>& lk, const ReqState& r, Clock::time_point until) {
  SegmentHeader& h = own();
  h.sleepers.fetch_add(1, std::memory_order_acq_rel);
  const uint32_t bell = h.bell.load(std::memory_order_acquire);
  if (!progress() && !fatal_ && r.status == ReqState::kPending) {
    lk.unlock();
    futex_wait(&h.bell, bell, until - Clock::now());
    lk.lock();
  }
  h.sleepers.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace ringbench::shm_detail
