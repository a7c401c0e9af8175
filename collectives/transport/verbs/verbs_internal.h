// Verbs transport internals shared by its files: constants, control messages, device, the class.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/store.h"
#include "collectives/transport.h"
#include "collectives/transport/core/transport_core.h"
#include "collectives/transport/verbs/verbs_transport.h"
#include "collectives/transport/verbs/verbs_wire.h"

namespace ringbench::verbs_detail {

using transport_core::Clock;
using transport_core::fmt_s;
using transport_core::seconds;
using std::chrono::milliseconds;

constexpr uint32_t kMagic = verbs_wire::kMagic;  // also on every control message
static_assert(verbs_wire::kLinkInfiniband == IBV_LINK_LAYER_INFINIBAND &&
              verbs_wire::kLinkEthernet == IBV_LINK_LAYER_ETHERNET && verbs_wire::kMtu256 == IBV_MTU_256 &&
              verbs_wire::kMtu4096 == IBV_MTU_4096);
constexpr int kCtrlRecvSlots = 16;  // control receives always posted per peer
constexpr int kCtrlSendSlots = 4;   // heartbeats, credits, an abort, a goodbye
constexpr size_t kCtrlMsgBytes = 512;
// Every memory region's access, as an int: libibverbs' ibv_reg_mr macro masks it with an
// enumerator of another enum, which C++20 deprecates (clang warns on the enum itself).
constexpr int kLocalWriteAccess = IBV_ACCESS_LOCAL_WRITE;
constexpr uint32_t kMaxDataWr = 256;  // data receives posted per peer; more wait in software
// Data sends posted per peer. Small: a send that finds no receive is NAKed (RNR) and the QP
// resends everything behind it, so a deep send queue turns one early send into a storm of
// retransmissions (measured on Soft-RoCE: a software NIC then starves its host).
constexpr uint32_t kMaxSendWr = 16;
// RC transport retries after an ACK timeout. Not 7: Soft-RoCE (rxe) treats 7 as "retry
// forever" (the spec reserves that only for RNR retries), so a dead peer would never surface.
constexpr uint8_t kRetryCount = 6;

enum WrKind : uint64_t { kDataSend = 0, kDataRecv = 1, kCtrlSend = 2, kCtrlRecv = 3 };
inline uint64_t wr_id(WrKind kind, int peer, int slot = 0) {
  return uint64_t(uint32_t(slot)) << 32 | uint64_t(uint32_t(peer)) << 2 | kind;
}

// kCredit carries the number of data receives the sender of it has posted for the receiver of
// it so far (8 bytes in text): the n-th send may go out once the peer has posted n receives.
enum CtrlType : uint32_t { kHeartbeat = 1, kAbort = 2, kBye = 3, kCredit = 4 };
struct CtrlMsg {
  uint32_t magic;
  uint32_t type;
  uint32_t length;  // of text
  char text[kCtrlMsgBytes - 12];
};
static_assert(sizeof(CtrlMsg) == kCtrlMsgBytes);

// The immediate carries a 32-bit hash of the 64-bit tag.
inline uint32_t tag_hash(uint64_t tag) {
  return static_cast<uint32_t>((tag * 0x9E3779B97F4A7C15ULL) >> 32);
}

std::string hex(uint64_t v, int width = 0);  // "0x1f"

// ---- device (verbs_device.cc) ---------------------------------------------------------

// Context and protection domain; shared by the transport and its buffers, so that buffers
// may outlive the transport without deregistering into a closed device.
struct Device {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  std::string name;
  ~Device() {
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
};

struct GidChoice {
  int index = -1;
  ibv_gid gid{};
  std::string type;  // "RoCE v2", "RoCE v1", "IB"
};

// Opens the device and port asked for (or the first ACTIVE one).
std::shared_ptr<Device> open_device(const VerbsOptions& o, int* port, ibv_port_attr* pattr);
// The GID at index `requested`, or (-1) the best one of the port.
GidChoice choose_gid(ibv_context* ctx, const std::string& dev, int port,
                     const ibv_port_attr& pa, int requested);
std::string provider_of(const std::string& dev, const ibv_device_attr& da);
double port_gbps(const ibv_port_attr& pa);
int mtu_bytes(uint32_t mtu);

// ---- requests (their buffers: verbs_memory.cc) -----------------------------------------

struct ReqState : transport_core::ReqState {
  std::vector<ibv_sge> sges;
};
using ReqPtr = std::shared_ptr<ReqState>;

// ---- transport -------------------------------------------------------------------------

class VerbsTransport : public transport_core::TransportCore<ReqState> {
 public:
  VerbsTransport(Store& store, int rank, int size, const VerbsOptions& opts);
  ~VerbsTransport() override;

  std::unique_ptr<Buffer> register_buffer(void* data, size_t bytes, MemKind kind) override;

 private:
  struct Peer {
    ibv_qp* data = nullptr;
    ibv_qp* ctrl = nullptr;
    uint32_t remote_data_qpn = 0, remote_ctrl_qpn = 0;
    std::string gid;
    std::deque<ReqPtr> sends_posted, recvs_posted;    // on the QP, completing in order
    std::deque<ReqPtr> sends_waiting, recvs_waiting;  // beyond the QP's depth, in order
    // Credits: a send is posted only when the peer has posted its receive, so that no send
    // is NAKed "receiver not ready": on RC an RNR NAK rewinds the sender to that packet, and
    // everything queued behind it is sent again (measured on Soft-RoCE: 2.2x the packets).
    uint64_t sends_total = 0;      // data sends posted to the QP
    uint64_t peer_recvs = 0;       // receives the peer has posted for us (its latest credit)
    uint64_t recvs_total = 0;      // data receives we posted for the peer
    uint64_t recvs_announced = 0;  // the latest count we sent it
    bool send_slot_busy[kCtrlSendSlots] = {};
    bool heartbeat_out = false;
    bool left = false;  // said goodbye
    Clock::time_point last_rx;   // a message from the peer (data or control) completed
    Clock::time_point last_ack;  // a send to the peer completed: its NIC acknowledged it
  };

  void setup(Store& store);
  void create_qps();
  void connect(Store& store);
  void release() noexcept;
  std::string who(int peer) const override;
  void prepare(ReqState& r, const Buffer& buf, size_t offset) const override;  // verbs_memory.cc
  std::vector<ibv_sge> sg_list(const Buffer& buf, size_t offset, size_t length) const;

  // All below run with mu_ held. TransportCore's hooks first.
  void post(const ReqPtr& r) override;
  void advance(ReqState& r) override;  // verbs_completion.cc, as the two below
  void await(std::unique_lock<std::mutex>& lk, ReqState& r, Clock::time_point deadline) override;
  TimeoutError timed_out(const ReqState& r, milliseconds waited) const override;
  void publish_abort(const std::string& reason) override;
  void post_data(int peer, const ReqPtr& r);
  void post_waiting(int peer);
  void post_ctrl_recv(int peer, int slot);
  bool post_ctrl(int peer, CtrlType type, const std::string& text = {});
  void announce_recvs(int peer);
  bool may_send(const Peer& p) const {
    return p.sends_posted.size() < send_depth_ && p.sends_total < p.peer_recvs;
  }
  int poll_cq();
  void on_completion(const ibv_wc& wc);
  void on_data(const ibv_wc& wc, int peer, bool is_send);
  void on_ctrl_recv(const ibv_wc& wc, int peer, int slot);
  void on_wc_error(const ibv_wc& wc, int peer, const ReqPtr& r);
  void fail(std::exception_ptr e) override;
  void complete(const ReqPtr& r, ReqState::Status s, std::exception_ptr e = nullptr);
  bool has_pending(const Peer& p) const;
  bool ctrl_idle() const;
  void progress_loop();
  void housekeeping(Clock::time_point now);
  char* ctrl_slot(int peer, bool send, int slot) {
    return ctrl_mem_.data() +
           (static_cast<size_t>(peer) * (kCtrlRecvSlots + kCtrlSendSlots) +
            (send ? kCtrlRecvSlots : 0) + static_cast<size_t>(slot)) * kCtrlMsgBytes;
  }

  VerbsOptions opts_;
  std::shared_ptr<Device> dev_;
  int port_ = 1;
  ibv_port_attr port_attr_{};
  ibv_device_attr dev_attr_{};
  GidChoice gid_;
  bool roce_ = false;
  uint32_t psn_ = 0;
  size_t chunk_ = 0;
  uint32_t max_sge_ = 1;
  uint32_t depth_ = kMaxDataWr;       // receives posted per peer
  uint32_t send_depth_ = kMaxSendWr;  // sends posted per peer
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::vector<char> ctrl_mem_;
  ibv_mr* ctrl_mr_ = nullptr;
  std::vector<Peer> peers_;
  int wake_fd_ = -1;
  milliseconds heartbeat_;
  Clock::time_point last_heartbeat_;

  bool closing_ = false;
  std::atomic<bool> stop_{false};
  std::thread progress_;
};

}  // namespace ringbench::verbs_detail
