// The shm transport's peer failures: aborts, goodbyes, dead or silent peers, heartbeats, fail().
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <string>

#include "base/errors.h"
#include "collectives/transport/shm/shm_internal.h"

namespace ringbench::shm_detail {

// ---- peer failures -------------------------------------------------------------------------

void ShmTransport::check_flags(Peer& p) {
  const uint32_t f = p.hdr->flags.load(std::memory_order_acquire);
  if (f & kAborted) {
    const size_t n = std::min<size_t>(p.hdr->abort_len, kMaxAbortText);
    std::string text(p.hdr->abort_text, n);
    for (char& c : text)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    fail(std::make_exception_ptr(IoError(p.rank, me() + ": " + who(p.rank) + " aborted: " + text)));
  } else if (f & kBye) {
    p.said_bye = true;
  }
}

// A peer that closed its transport sends and receives nothing more: a send to it, or a receive
// from it beyond what its ring still holds, can never complete.
void ShmTransport::check_left(Peer& p) {
  const bool stuck_recv = (!p.recvq.empty() || p.cur) && p.in.available() == 0;
  if (!p.sendq.empty() || !p.unacked.empty() || stuck_recv)
    fail(std::make_exception_ptr(IoError(
        p.rank, me() + ": " + who(p.rank) + " left the job while a transfer with it was pending")));
}

bool ShmTransport::process_gone(const Peer& p) const {
  if (p.proc.pid_ns == 0 || p.proc.pid_ns != pid_ns_) return false;  // its pid means nothing here
  return ::kill(static_cast<pid_t>(p.proc.pid), 0) != 0 && errno == ESRCH;
}

void ShmTransport::check_alive(Peer& p, Clock::time_point now) {
  const uint64_t beat = p.hdr->heartbeat.load(std::memory_order_acquire);
  if (beat != p.last_beat) {
    p.last_beat = beat;
    p.beat_at = now;
  }
  check_flags(p);
  if (fatal_ || p.said_bye) return;
  if (process_gone(p))
    fail(std::make_exception_ptr(
        IoError(p.rank, me() + ": " + who(p.rank) + " is gone: the process died or was killed")));
  else if (now - p.beat_at > opts_.timeout)
    fail(std::make_exception_ptr(IoError(
        p.rank, me() + ": " + who(p.rank) + " gave no heartbeat for " + fmt_s(seconds(now - p.beat_at)) +
                    " (timeout " + fmt_s(seconds(opts_.timeout)) + "): the process is stopped or hung")));
}

// Beats our heartbeat, watches the peers, and moves transfers nobody waits on (the caller may
// be computing while a large send still streams out).
void ShmTransport::housekeeping() {
  std::unique_lock hk(hk_mu_);
  do {
    own().heartbeat.fetch_add(1, std::memory_order_release);
    // The heartbeat must not wait for a long copy under mu_ (a peer would read the silence as a
    // hang): when a transfer holds the lock, this round only beats.
    std::unique_lock lk(mu_, std::try_to_lock);
    if (!lk.owns_lock()) continue;
    try {
      const auto now = Clock::now();
      for (auto& p : peers_)
        if (p.hdr && !fatal_) check_alive(p, now);
      progress();
    } catch (...) {  // an exception leaving this thread would end the process: fail the transport
      if (!fatal_) fail(std::current_exception());
    }
  } while (!hk_cv_.wait_for(hk, heartbeat_, [&] { return hk_stop_; }));
}

// The first failure wins; every pending request fails with it, and from then on the transport
// touches no caller memory (a failed request's buffer may be freed at once).
void ShmTransport::fail(std::exception_ptr e) {
  if (!fatal_) fatal_ = e;
  // Single-copy sends not yet read are read straight out of their buffers, which their owners
  // may free once these requests fail: revoke them first, where the readers look.
  bool unread = false;
  for (auto& p : peers_) unread = unread || !p.unacked.empty();
  if (unread) {
    std::string why = "failed";
    try {
      std::rethrow_exception(fatal_);
    } catch (const std::exception& x) {
      why = x.what();
    } catch (...) {
    }
    publish_abort(why);
  }
  auto fail_req = [&](const ReqPtr& r) {
    if (r && r->status == ReqState::kPending) {
      r->status = ReqState::kFailed;
      r->error = fatal_;
    }
  };
  for (auto& p : peers_) {
    for (auto& item : p.sendq) fail_req(item.req);
    for (auto& r : p.unacked) fail_req(r);
    for (auto& r : p.recvq) fail_req(r);
    fail_req(p.cur);
    p.sendq.clear();
    p.unacked.clear();
    p.recvq.clear();
    p.cur.reset();
  }
  ring_bell(own(), true);  // wakes our own sleeping waiters
  cv_.notify_all();
}

bool ShmTransport::has_pending() const {
  for (auto& p : peers_)
    if (!p.sendq.empty() || !p.unacked.empty() || !p.recvq.empty() || p.cur) return true;
  return false;
}

}  // namespace ringbench::shm_detail
