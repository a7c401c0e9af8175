// The verbs transport's queue pairs: setup, creation, and the address exchange that connects them.
#include <sys/eventfd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "collectives/net.h"
#include "collectives/transport/verbs/verbs_internal.h"

namespace ringbench::verbs_detail {
namespace {

// Local ACK timeout 4.096 us * 2^t: seven tries (kRetryCount 6) span half to all of the
// timeout, so a dead peer surfaces within it. Not shorter: a software NIC (Soft-RoCE in an
// emulated guest) can queue packets for seconds, and a premature retransmission of a whole
// window only deepens that queue.
uint8_t ack_timeout_exponent(milliseconds timeout) {
  double per_try_us = static_cast<double>(timeout.count()) * 1000.0 / 8.0;
  int t = 0;
  while (t < 31 && 4.096 * static_cast<double>(uint64_t{1} << (t + 1)) <= per_try_us) ++t;
  return static_cast<uint8_t>(std::clamp(t, 14, 22));
}

}  // namespace

void VerbsTransport::setup(Store& store) {
  if (ibv_query_device(dev_->ctx, &dev_attr_) != 0) throw Error("ibv_query_device failed on " + dev_->name);
  roce_ = port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET;
  gid_ = choose_gid(dev_->ctx, dev_->name, port_, port_attr_, opts_.gid_index);
  chunk_ = std::min<uint64_t>(opts_.mr_chunk_bytes, dev_attr_.max_mr_size);
  max_sge_ = static_cast<uint32_t>(std::clamp(dev_attr_.max_sge, 1, 32));
  const uint32_t peers = static_cast<uint32_t>(std::max(1, size_ - 1));
  const uint32_t cqe_per_peer = static_cast<uint32_t>(std::max(dev_attr_.max_cqe, 1)) / peers;
  depth_ = std::min({kMaxDataWr, static_cast<uint32_t>(std::max(dev_attr_.max_qp_wr, 1)),
                     cqe_per_peer > 2 * (kCtrlRecvSlots + kCtrlSendSlots)
                         ? (cqe_per_peer - kCtrlRecvSlots - kCtrlSendSlots) / 2
                         : 1u});
  std::random_device rd;
  psn_ = rd() & 0xffffff;

  const std::string provider = provider_of(dev_->name, dev_attr_);
  const double gbps = port_gbps(port_attr_);
  caps_ = {"verbs", true, false, gbps};
  path_ = {{"transport", "verbs"},
           {"device", dev_->name},
           {"provider", provider},
           {"port", std::to_string(port_)},
           {"link_layer", roce_ ? "Ethernet" : "InfiniBand"},
           {"gid_index", gid_.index >= 0 ? std::to_string(gid_.index) : "none"},
           {"gid_type", gid_.index >= 0 ? gid_.type : "none"},
           {"gid", gid_.index >= 0 ? verbs_wire::gid_string(gid_.gid.raw) : "none"},
           {"active_mtu", std::to_string(mtu_bytes(port_attr_.active_mtu))},
           {"link_gbps", gbps > 0 ? std::to_string(gbps) : "unknown"},
           {"mr_chunk_bytes", std::to_string(chunk_)},
           {"spin_us", std::to_string(opts_.spin.count())}};
  if (!roce_) path_["lid"] = std::to_string(port_attr_.lid);

  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  check_errno(wake_fd_ >= 0, "eventfd");
  channel_ = ibv_create_comp_channel(dev_->ctx);
  check_errno(channel_ != nullptr, "ibv_create_comp_channel on " + dev_->name);
  net::set_nonblocking(channel_->fd);
  send_depth_ = std::min(kMaxSendWr, depth_);
  int cqe = static_cast<int>(peers * (depth_ + send_depth_ + kCtrlRecvSlots + kCtrlSendSlots));
  cq_ = ibv_create_cq(dev_->ctx, std::min(cqe, dev_attr_.max_cqe), nullptr, channel_, 0);
  check_errno(cq_ != nullptr, "ibv_create_cq of " + std::to_string(cqe) + " entries on " + dev_->name);

  ctrl_mem_.assign(static_cast<size_t>(size_) * (kCtrlRecvSlots + kCtrlSendSlots) * kCtrlMsgBytes, 0);
  ctrl_mr_ = ibv_reg_mr(dev_->pd, ctrl_mem_.data(), ctrl_mem_.size(), kLocalWriteAccess);
  check_errno(ctrl_mr_ != nullptr, "ibv_reg_mr (control buffers) on " + dev_->name);
  create_qps();
  connect(store);
  peers_[static_cast<size_t>(rank_)].gid = path_["gid"];
  // Armed before the progress thread starts; it re-arms after every event.
  if (ibv_req_notify_cq(cq_, 0) != 0) throw Error("ibv_req_notify_cq failed on " + dev_->name);
}

void VerbsTransport::create_qps() {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    Peer& p = peers_[static_cast<size_t>(r)];
    auto make = [&](uint32_t send_wr, uint32_t recv_wr, uint32_t sge) {
      ibv_qp_init_attr a{};
      a.send_cq = a.recv_cq = cq_;
      a.qp_type = IBV_QPT_RC;
      a.sq_sig_all = 1;
      a.cap.max_send_wr = send_wr;
      a.cap.max_recv_wr = recv_wr;
      a.cap.max_send_sge = a.cap.max_recv_sge = sge;
      a.cap.max_inline_data = 0;  // PVRDMA supports none
      ibv_qp* qp = ibv_create_qp(dev_->pd, &a);
      check_errno(qp != nullptr, "ibv_create_qp (RC) on " + dev_->name);
      ibv_qp_attr at{};
      at.qp_state = IBV_QPS_INIT;
      at.pkey_index = 0;
      at.port_num = static_cast<uint8_t>(port_);
      at.qp_access_flags = 0;  // SEND/RECV only: no remote access to our memory
      int rc = ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      if (rc != 0) {
        ibv_destroy_qp(qp);
        throw Error("ibv_modify_qp to INIT failed on " + dev_->name + ": " + std::strerror(rc));
      }
      return qp;
    };
    p.data = make(send_depth_, depth_, max_sge_);
    p.ctrl = make(kCtrlSendSlots, kCtrlRecvSlots, 1);
    for (int s = 0; s < kCtrlRecvSlots; ++s) post_ctrl_recv(r, s);  // allowed in INIT
  }
}

void VerbsTransport::connect(Store& store) {
  verbs_wire::ConnInfo mine{};
  mine.magic = verbs_wire::kMagic;
  mine.version = verbs_wire::kProtocolVersion;
  mine.rank = static_cast<uint32_t>(rank_);
  mine.world_size = static_cast<uint32_t>(size_);
  mine.psn = psn_;
  mine.mtu = port_attr_.active_mtu;
  mine.lid = port_attr_.lid;
  mine.link_layer = port_attr_.link_layer;
  std::memcpy(mine.gid, gid_.gid.raw, 16);
  std::strncpy(mine.job_id, opts_.job_id.c_str(), sizeof mine.job_id - 1);
  std::vector<uint32_t> qpns(2 * static_cast<size_t>(size_), 0);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) {
      qpns[2 * static_cast<size_t>(r)] = peers_[static_cast<size_t>(r)].data->qp_num;
      qpns[2 * static_cast<size_t>(r) + 1] = peers_[static_cast<size_t>(r)].ctrl->qp_num;
    }
  const std::string key = opts_.key_prefix + "/conn/";
  store.set(key + std::to_string(rank_), verbs_wire::encode(mine, qpns));

  const uint8_t timeout = ack_timeout_exponent(opts_.timeout);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    Peer& p = peers_[static_cast<size_t>(r)];
    const verbs_wire::PeerAddress ci =
        verbs_wire::decode(store.get(key + std::to_string(r), opts_.timeout),
                           {.peer = r, .rank = rank_, .world_size = size_, .job_id = opts_.job_id,
                            .link_layer = port_attr_.link_layer, .me = me()});
    const std::string them = "rank " + std::to_string(r) + " (gid " + verbs_wire::gid_string(ci.gid) + ")";
    p.remote_data_qpn = ci.data_qpn;
    p.remote_ctrl_qpn = ci.ctrl_qpn;
    p.gid = verbs_wire::gid_string(ci.gid);
    const auto mtu = static_cast<ibv_mtu>(std::min<uint32_t>(ci.mtu, port_attr_.active_mtu));
    for (auto [qp, remote] : {std::pair{p.data, p.remote_data_qpn}, std::pair{p.ctrl, p.remote_ctrl_qpn}}) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_RTR;
      a.path_mtu = mtu;
      a.dest_qp_num = remote;
      a.rq_psn = ci.psn;
      a.max_dest_rd_atomic = 1;
      a.min_rnr_timer = 12;  // 0.64 ms before a send to a not-yet-posted receive is retried
      a.ah_attr.port_num = static_cast<uint8_t>(port_);
      a.ah_attr.dlid = ci.lid;
      // RoCE has no LIDs: every packet carries a GRH addressed by GID.
      if (roce_ || opts_.gid_index >= 0) {
        a.ah_attr.is_global = 1;
        std::memcpy(a.ah_attr.grh.dgid.raw, ci.gid, 16);
        a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_.index);
        a.ah_attr.grh.hop_limit = 64;
      }
      int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                         IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      if (rc != 0)
        throw IoError(r, me() + ": cannot connect to " + them + " (QP to RTR: " + std::strerror(rc) +
                             "; wrong --gid-index, or GIDs of different types?)");
      ibv_qp_attr s{};
      s.qp_state = IBV_QPS_RTS;
      s.timeout = timeout;
      s.retry_cnt = kRetryCount;
      s.rnr_retry = 7;  // infinite: a send may precede its receive by any time
      s.sq_psn = psn_;
      s.max_rd_atomic = 1;
      rc = ibv_modify_qp(qp, &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
      if (rc != 0) throw IoError(r, me() + ": cannot connect to " + them + " (QP to RTS: " + std::strerror(rc) + ")");
    }
    p.last_rx = p.last_ack = Clock::now();
  }
  // Nobody sends before every QP is ready to receive (a packet to a QP still in INIT is
  // dropped and costs an ACK timeout).
  store_barrier(store, opts_.key_prefix + "/ready", size_, opts_.timeout);
  for (auto& p : peers_) p.last_rx = p.last_ack = Clock::now();
}

}  // namespace ringbench::verbs_detail
