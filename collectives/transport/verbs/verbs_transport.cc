// The verbs transport's life (construction, closing) and posting; make_verbs_transport.
#include "collectives/transport/verbs/verbs_transport.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "base/errors.h"
#include "collectives/transport/verbs/verbs_internal.h"

namespace ringbench {
namespace verbs_detail {

VerbsTransport::VerbsTransport(Store& store, int rank, int size, const VerbsOptions& opts)
    : TransportCore(rank, size), opts_(opts), peers_(static_cast<size_t>(size)) {
  if (opts.job_id.size() >= sizeof(verbs_wire::ConnInfo::job_id))
    throw Error("job id longer than 63 characters: '" + opts.job_id + "'");
  if (opts.mr_chunk_bytes < 4096)
    throw Error("--mr-chunk must be at least 4096 bytes, got " + std::to_string(opts.mr_chunk_bytes));
  heartbeat_ = std::clamp(opts.timeout / 8, milliseconds(10), milliseconds(1000));
  dev_ = open_device(opts, &port_, &port_attr_);  // throws at once without a device
  try {
    setup(store);
  } catch (...) {
    release();
    throw;
  }
  last_heartbeat_ = Clock::now();
  progress_ = std::thread([this] { progress_loop(); });
}

std::string VerbsTransport::who(int peer) const {
  const Peer& p = peers_[static_cast<size_t>(peer)];
  return "rank " + std::to_string(peer) + " (gid " + p.gid + ", qpn " + hex(p.remote_data_qpn) + ")";
}

void VerbsTransport::release() noexcept {
  for (auto& p : peers_) {
    if (p.data) ibv_destroy_qp(p.data);
    if (p.ctrl) ibv_destroy_qp(p.ctrl);
    p.data = p.ctrl = nullptr;
  }
  if (ctrl_mr_) ibv_dereg_mr(ctrl_mr_);
  if (cq_) ibv_destroy_cq(cq_);
  if (channel_) ibv_destroy_comp_channel(channel_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  ctrl_mr_ = nullptr;
  cq_ = nullptr;
  channel_ = nullptr;
  wake_fd_ = -1;
  dev_.reset();
}

VerbsTransport::~VerbsTransport() {
  {
    std::unique_lock lk(mu_);
    closing_ = true;
    bool pending = false;
    for (auto& p : peers_)
      if (has_pending(p)) pending = true;
    fail_pending_at_close(pending);
    // Say goodbye, so that peers do not take our vanishing QPs for a death, and wait
    // (bounded) until the control sends are acknowledged.
    for (int r = 0; r < size_; ++r)
      if (r != rank_ && !peers_[static_cast<size_t>(r)].left) post_ctrl(r, kBye);
    await_goodbyes(lk, opts_.timeout, [&] { return ctrl_idle(); });
  }
  stop_ = true;
  transport_core::signal_eventfd(wake_fd_);
  progress_.join();
  release();
}

bool VerbsTransport::ctrl_idle() const {
  for (int r = 0; r < size_; ++r)
    for (bool busy : peers_[static_cast<size_t>(r)].send_slot_busy)
      if (busy) return false;
  return true;
}

bool VerbsTransport::has_pending(const Peer& p) const {
  return !p.sends_posted.empty() || !p.recvs_posted.empty() || !p.sends_waiting.empty() ||
         !p.recvs_waiting.empty();
}

// ---- posting ---------------------------------------------------------------------------

// Straight to the QP while it has room (and, for a send, the peer has posted its receive),
// behind those waiting otherwise.
void VerbsTransport::post(const ReqPtr& r) {
  const int peer = r->peer;
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.left) throw left_job(*r);
  if (r->is_send) {
    if (may_send(p) && p.sends_waiting.empty())
      post_data(peer, r);
    else
      p.sends_waiting.push_back(r);
  } else if (p.recvs_posted.size() < depth_ && p.recvs_waiting.empty()) {
    post_data(peer, r);
    announce_recvs(peer);
  } else {
    p.recvs_waiting.push_back(r);
  }
}

void VerbsTransport::post_data(int peer, const ReqPtr& r) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  int rc;
  if (r->is_send) {
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = wr_id(kDataSend, peer);
    wr.sg_list = r->sges.empty() ? nullptr : r->sges.data();
    wr.num_sge = static_cast<int>(r->sges.size());
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;  // never IBV_SEND_INLINE: PVRDMA has no inline data
    wr.imm_data = htonl(tag_hash(r->tag));
    rc = ibv_post_send(p.data, &wr, &bad);
    if (rc == 0) {
      p.sends_posted.push_back(r);
      ++p.sends_total;
    }
  } else {
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = wr_id(kDataRecv, peer);
    wr.sg_list = r->sges.empty() ? nullptr : r->sges.data();
    wr.num_sge = static_cast<int>(r->sges.size());
    rc = ibv_post_recv(p.data, &wr, &bad);
    if (rc == 0) {
      p.recvs_posted.push_back(r);
      ++p.recvs_total;
    }
  }
  if (rc != 0) {
    auto e = std::make_exception_ptr(IoError(
        peer, me() + ": ibv_post_" + (r->is_send ? "send to " : "recv from ") + who(peer) +
                  " failed: " + std::strerror(rc)));
    complete(r, ReqState::kFailed, e);
    fail(e);
  }
}

void VerbsTransport::post_waiting(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  while (!fatal_ && !p.sends_waiting.empty() && may_send(p)) {
    ReqPtr r = std::move(p.sends_waiting.front());
    p.sends_waiting.pop_front();
    post_data(peer, r);
  }
  while (!fatal_ && !p.recvs_waiting.empty() && p.recvs_posted.size() < depth_) {
    ReqPtr r = std::move(p.recvs_waiting.front());
    p.recvs_waiting.pop_front();
    post_data(peer, r);
  }
  announce_recvs(peer);
}

// Tells the peer how many receives are posted for it. With every control slot busy the count
// goes out when one frees (on_completion), so credits never stay behind.
void VerbsTransport::announce_recvs(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (fatal_ || closing_ || p.left || p.recvs_total == p.recvs_announced) return;
  const uint64_t n = p.recvs_total;
  if (post_ctrl(peer, kCredit, std::string(reinterpret_cast<const char*>(&n), sizeof n))) p.recvs_announced = n;
}

void VerbsTransport::post_ctrl_recv(int peer, int slot) {
  ibv_sge sge{reinterpret_cast<uint64_t>(ctrl_slot(peer, false, slot)),
              static_cast<uint32_t>(kCtrlMsgBytes), ctrl_mr_->lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id(kCtrlRecv, peer, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  int rc = ibv_post_recv(peers_[static_cast<size_t>(peer)].ctrl, &wr, &bad);
  if (rc != 0 && !closing_)
    throw Error(me() + ": ibv_post_recv (control) failed: " + std::strerror(rc));
}

// Returns false when no slot is free or the post failed (the caller does not care).
bool VerbsTransport::post_ctrl(int peer, CtrlType type, const std::string& text) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  int slot = -1;
  for (int s = 0; s < kCtrlSendSlots && slot < 0; ++s)
    if (!p.send_slot_busy[s]) slot = s;
  if (slot < 0) return false;
  auto* m = reinterpret_cast<CtrlMsg*>(ctrl_slot(peer, true, slot));
  m->magic = kMagic;
  m->type = type;
  m->length = static_cast<uint32_t>(std::min(text.size(), sizeof m->text));
  std::memcpy(m->text, text.data(), m->length);
  ibv_sge sge{reinterpret_cast<uint64_t>(m), static_cast<uint32_t>(kCtrlMsgBytes), ctrl_mr_->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id(kCtrlSend, peer, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (ibv_post_send(p.ctrl, &wr, &bad) != 0) return false;
  p.send_slot_busy[slot] = true;
  if (type == kHeartbeat) p.heartbeat_out = true;
  return true;
}

void VerbsTransport::publish_abort(const std::string& reason) {
  for (int r = 0; r < size_; ++r)
    if (r != rank_ && !peers_[static_cast<size_t>(r)].left) post_ctrl(r, kAbort, reason);
}

}  // namespace verbs_detail

std::unique_ptr<Transport> make_verbs_transport(Store& store, int rank, int size,
                                                const VerbsOptions& opts) {
  return std::make_unique<verbs_detail::VerbsTransport>(store, rank, size, opts);
}

}  // namespace ringbench
