// The verbs transport's completion engine: test and wait, the CQ, failures, the progress thread.
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/errors.h"
#include "collectives/transport/verbs/verbs_internal.h"

namespace ringbench::verbs_detail {

// ---- completion ------------------------------------------------------------------------

void VerbsTransport::advance(ReqState&) { poll_cq(); }

void VerbsTransport::await(std::unique_lock<std::mutex>& lk, ReqState& r, Clock::time_point deadline) {
  const auto spin_end = Clock::now() + opts_.spin;
  while (r.status == ReqState::kPending) {
    auto now = Clock::now();
    if (now >= deadline) break;
    if (now < spin_end) {
      // Polling costs a few hundred ns; sleeping and being woken costs tens of microseconds.
      if (poll_cq() == 0) {
        lk.unlock();
        sched_yield();
        lk.lock();
      }
      continue;
    }
    cv_.wait_until(lk, deadline);  // the progress thread notifies on every completion
  }
}

TimeoutError VerbsTransport::timed_out(const ReqState& r, milliseconds waited) const {
  const Peer& p = peers_[static_cast<size_t>(r.peer)];
  double heard = seconds(Clock::now() - p.last_rx);
  return transport_core::timeout_error(me(), who(r.peer), r, waited, heard, opts_.timeout, "", false);
}

void VerbsTransport::complete(const ReqPtr& r, ReqState::Status s, std::exception_ptr e) {
  if (r->status != ReqState::kPending) return;
  r->status = s;
  r->error = std::move(e);
  cv_.notify_all();
}

// The first failure wins; every pending request fails with it, and the data QPs go to the
// error state so the HCA stops touching caller memory (their WRs complete as flushed).
void VerbsTransport::fail(std::exception_ptr e) {
  if (!fatal_) fatal_ = e;
  for (auto& p : peers_) {
    for (auto* q : {&p.sends_posted, &p.recvs_posted, &p.sends_waiting, &p.recvs_waiting}) {
      for (auto& r : *q) complete(r, ReqState::kFailed, fatal_);
      q->clear();
    }
    if (p.data) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_ERR;
      ibv_modify_qp(p.data, &a, IBV_QP_STATE);
    }
  }
  cv_.notify_all();
}

int VerbsTransport::poll_cq() {
  ibv_wc wc[16];
  int total = 0;
  for (;;) {
    int n = ibv_poll_cq(cq_, 16, wc);
    if (n < 0) {
      if (!fatal_) fail(std::make_exception_ptr(IoError(-1, me() + ": ibv_poll_cq failed on " + dev_->name)));
      return total;
    }
    for (int i = 0; i < n; ++i) on_completion(wc[i]);
    total += n;
    if (n < 16) return total;
  }
}

void VerbsTransport::on_completion(const ibv_wc& wc) {
  const auto kind = static_cast<WrKind>(wc.wr_id & 3);
  const int peer = static_cast<int>((wc.wr_id >> 2) & 0x3fffffff);
  const int slot = static_cast<int>(wc.wr_id >> 32);
  if (peer < 0 || peer >= size_ || peer == rank_) return;
  Peer& p = peers_[static_cast<size_t>(peer)];
  switch (kind) {
    case kDataSend:
    case kDataRecv:
      on_data(wc, peer, kind == kDataSend);
      break;
    case kCtrlSend:
      p.send_slot_busy[slot] = false;
      p.heartbeat_out = false;  // sends complete in order: any older heartbeat is done
      if (wc.status == IBV_WC_SUCCESS) {
        p.last_ack = Clock::now();
        announce_recvs(peer);
      } else if (!p.left && !closing_ && !fatal_) {
        on_wc_error(wc, peer, nullptr);
      }
      cv_.notify_all();
      break;
    case kCtrlRecv:
      on_ctrl_recv(wc, peer, slot);
      break;
  }
}

void VerbsTransport::on_data(const ibv_wc& wc, int peer, bool is_send) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  auto& q = is_send ? p.sends_posted : p.recvs_posted;
  if (q.empty()) return;  // flushed after a failure that already failed its request
  ReqPtr r = std::move(q.front());
  q.pop_front();
  if (wc.status != IBV_WC_SUCCESS) return on_wc_error(wc, peer, r);
  if (is_send) p.last_ack = Clock::now();
  if (!is_send) {
    p.last_rx = Clock::now();
    const uint32_t got = (wc.wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc.imm_data) : 0;
    if (wc.byte_len != r->length || !(wc.wc_flags & IBV_WC_WITH_IMM) || got != tag_hash(r->tag)) {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    " sent a %u-byte message with tag hash %08x where this rank expects %zu "
                    "bytes with tag %016llx (hash %08x)",
                    wc.byte_len, got, r->length, static_cast<unsigned long long>(r->tag),
                    tag_hash(r->tag));
      auto e = std::make_exception_ptr(IoError(peer, me() + ": " + who(peer) + buf +
                                                         ": the ranks disagree on the operation"));
      complete(r, ReqState::kFailed, e);
      return fail(e);
    }
  }
  complete(r, ReqState::kDone);
  post_waiting(peer);
}

void VerbsTransport::on_ctrl_recv(const ibv_wc& wc, int peer, int slot) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (wc.status != IBV_WC_SUCCESS) {
    if (!p.left && !closing_ && !fatal_) on_wc_error(wc, peer, nullptr);
    return;
  }
  p.last_rx = Clock::now();
  CtrlMsg m;
  std::memcpy(&m, ctrl_slot(peer, false, slot), sizeof m);
  try {
    post_ctrl_recv(peer, slot);
  } catch (const Error& e) {
    if (!fatal_) fail(std::make_exception_ptr(IoError(peer, e.what())));
  }
  if (m.magic != kMagic) {
    if (!fatal_) fail(std::make_exception_ptr(IoError(peer, me() + ": corrupt control message from " + who(peer))));
    return;
  }
  switch (m.type) {
    case kAbort:
      if (!fatal_)
        fail(std::make_exception_ptr(IoError(
            peer, me() + ": " + who(peer) + " aborted" +
                      (m.length ? ": " + std::string(m.text, std::min<size_t>(m.length, sizeof m.text)) : ""))));
      break;
    case kCredit: {
      uint64_t n = 0;
      if (m.length != sizeof n) {
        if (!fatal_) fail(std::make_exception_ptr(IoError(peer, me() + ": malformed credit from " + who(peer))));
        return;
      }
      std::memcpy(&n, m.text, sizeof n);
      if (n > p.peer_recvs) {  // RC delivers in order: a count never goes back
        p.peer_recvs = n;
        post_waiting(peer);
      }
      break;
    }
    case kBye:
      p.left = true;
      if (has_pending(p) && !fatal_)
        fail(std::make_exception_ptr(IoError(
            peer, me() + ": " + who(peer) + " left the job while a transfer was pending")));
      cv_.notify_all();
      break;
    default:  // heartbeat
      break;
  }
}

namespace {

std::string wc_explanation(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_RETRY_EXC_ERR:
      return "the peer stopped acknowledging (RC retries exhausted): the process died or was "
             "killed, or the network is down";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "the peer posted no receive (RNR retries exhausted)";
    case IBV_WC_LOC_LEN_ERR:
      return "a message longer than the receive this rank posted: the ranks disagree on the "
             "operation";
    case IBV_WC_REM_INV_REQ_ERR:
      return "the peer rejected the message (longer than its receive?): the ranks disagree on "
             "the operation";
    case IBV_WC_REM_OP_ERR:
      return "the peer's queue pair failed or is gone: the process died or was killed, or it "
             "failed itself";
    case IBV_WC_WR_FLUSH_ERR:
      return "the queue pair is in the error state";
    default:
      return "";
  }
}

}  // namespace

void VerbsTransport::on_wc_error(const ibv_wc& wc, int peer, const ReqPtr& r) {
  std::string what = me() + ": " + (r ? (r->is_send ? "send of " : "receive of ") +
                                            std::to_string(r->length) + " bytes " +
                                            (r->is_send ? "to " : "from ")
                                      : std::string("control message to ")) +
                     who(peer) + " failed: " + ibv_wc_status_str(wc.status) + " (vendor error " +
                     hex(wc.vendor_err) + ")";
  std::string why = wc_explanation(wc.status);
  if (!why.empty()) what += ": " + why;
  auto e = std::make_exception_ptr(IoError(peer, what));
  if (r) complete(r, ReqState::kFailed, fatal_ ? fatal_ : e);
  if (!fatal_) fail(e);
}

// ---- progress thread -------------------------------------------------------------------

void VerbsTransport::progress_loop() {
  while (!stop_) {
    pollfd fds[2] = {{channel_->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    ::poll(fds, 2, static_cast<int>(heartbeat_.count()));
    std::lock_guard lk(mu_);
    if (fds[0].revents & POLLIN) {
      ibv_cq* ev_cq = nullptr;
      void* ctx = nullptr;
      unsigned events = 0;
      while (ibv_get_cq_event(channel_, &ev_cq, &ctx) == 0) ++events;
      if (events) ibv_ack_cq_events(cq_, events);
      // Re-arm before draining, so a completion that lands after the drain raises an event.
      ibv_req_notify_cq(cq_, 0);
    }
    if (poll_cq() > 0) cv_.notify_all();
    housekeeping(Clock::now());
  }
}

void VerbsTransport::housekeeping(Clock::time_point now) {
  if (now - last_heartbeat_ < heartbeat_) return;
  last_heartbeat_ = now;
  for (int r = 0; r < size_; ++r) {
    Peer& p = peers_[static_cast<size_t>(r)];
    if (r == rank_ || p.left) continue;
    if (!closing_ && !p.heartbeat_out) post_ctrl(r, kHeartbeat);
    // Silent for the timeout while its NIC still acknowledges our sends: the process is
    // stopped or hung. Without recent acknowledgements the path itself is slow (a software
    // NIC's queue) or the peer is gone, which the RC retries report; silence twice as long
    // fails regardless.
    const auto silent = now - p.last_rx;
    const bool acked = now - p.last_ack < std::max<Clock::duration>(opts_.timeout / 2, 2 * heartbeat_);
    if (!fatal_ && ((silent > opts_.timeout && acked) || silent > 2 * opts_.timeout))
      fail(std::make_exception_ptr(IoError(
          r, me() + ": " + who(r) + " sent nothing, not even a heartbeat, for " +
                 fmt_s(seconds(now - p.last_rx)) + " (timeout " + fmt_s(seconds(opts_.timeout)) +
                 "): the process is stopped or hung, or the network is down")));
  }
}

}  // namespace ringbench::verbs_detail
