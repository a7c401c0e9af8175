#include "collectives/transport/verbs/verbs_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>

#include "base/errors.h"
#include "collectives/transport/core/transport_core.h"
#include "collectives/transport/verbs/verbs_wire.h"

namespace ringbench {
namespace {

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
constexpr uint32_t kMaxDataWr = 256;  // data receives posted per peer; more wait in software
// Data sends posted per peer. Small: a send that finds no receive is NAKed (RNR) and the QP
// resends everything behind it, so a deep send queue turns one early send into a storm of
// retransmissions (measured on Soft-RoCE: a software NIC then starves its host).
constexpr uint32_t kMaxSendWr = 16;
// RC transport retries after an ACK timeout. Not 7: Soft-RoCE (rxe) treats 7 as "retry
// forever" (the spec reserves that only for RNR retries), so a dead peer would never surface.
constexpr uint8_t kRetryCount = 6;

enum WrKind : uint64_t { kDataSend = 0, kDataRecv = 1, kCtrlSend = 2, kCtrlRecv = 3 };
uint64_t wr_id(WrKind kind, int peer, int slot = 0) {
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
uint32_t tag_hash(uint64_t tag) {
  return static_cast<uint32_t>((tag * 0x9E3779B97F4A7C15ULL) >> 32);
}

std::string hex(uint64_t v, int width = 0) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%0*llx", width, static_cast<unsigned long long>(v));
  return b;
}
std::string read_line(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::string s;
  std::getline(f, s);
  return s;
}

// ---- device ----------------------------------------------------------------------------

struct DeviceList {
  ibv_device** list = nullptr;
  int n = 0;
  DeviceList() { list = ibv_get_device_list(&n); }
  ~DeviceList() {
    if (list) ibv_free_device_list(list);
  }
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
  std::vector<std::string> names() const {
    std::vector<std::string> v;
    for (int i = 0; list && i < n; ++i) v.push_back(ibv_get_device_name(list[i]));
    return v;
  }
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

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

const char* port_state_name(ibv_port_state s) { return ibv_port_state_str(s); }

// Opens the device and port asked for (or the first ACTIVE one).
std::shared_ptr<Device> open_device(const VerbsOptions& o, int* port, ibv_port_attr* pattr) {
  DeviceList devs;
  if (!devs.list || devs.n == 0)
    throw Error("--transport verbs: no RDMA device found (ibv_get_device_list returned none): "
                "load rdma_rxe / check the PVRDMA driver, or use --transport tcp");
  std::vector<std::string> tried;
  for (int i = 0; i < devs.n; ++i) {
    std::string name = ibv_get_device_name(devs.list[i]);
    if (!o.device.empty() && name != o.device) continue;
    auto dev = std::make_shared<Device>();
    dev->name = name;
    dev->ctx = ibv_open_device(devs.list[i]);
    if (!dev->ctx) {
      tried.push_back(name + ": cannot open (" + std::strerror(errno) + ")");
      continue;
    }
    ibv_device_attr da{};
    if (ibv_query_device(dev->ctx, &da) != 0) {
      tried.push_back(name + ": ibv_query_device failed");
      continue;
    }
    if (o.port > 0 && o.port > da.phys_port_cnt)
      throw Error("--ib-port " + std::to_string(o.port) + ": device " + name + " has " +
                  std::to_string(da.phys_port_cnt) + " port(s)");
    for (int p = 1; p <= da.phys_port_cnt; ++p) {
      if (o.port > 0 && p != o.port) continue;
      ibv_port_attr pa{};
      if (ibv_query_port(dev->ctx, static_cast<uint8_t>(p), &pa) != 0) continue;
      if (pa.state != IBV_PORT_ACTIVE) {
        tried.push_back(name + " port " + std::to_string(p) + ": " + port_state_name(pa.state));
        continue;
      }
      dev->pd = ibv_alloc_pd(dev->ctx);
      check_errno(dev->pd != nullptr, "ibv_alloc_pd on " + name);
      *port = p;
      *pattr = pa;
      return dev;
    }
  }
  if (!o.device.empty() && tried.empty())
    throw Error("--transport verbs --ib-dev " + o.device + ": no such RDMA device; this host has: " +
                join(devs.names()));
  throw Error("--transport verbs: no ACTIVE port on " +
              (o.device.empty() ? std::string("any RDMA device") : o.device) + " (" +
              join(tried) + "): is the link up (rdma link show)?");
}

struct GidChoice {
  int index = -1;
  ibv_gid gid{};
  std::string type;  // "RoCE v2", "RoCE v1", "IB"
};

std::string gid_type_name(uint32_t t) {
  switch (t) {
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    default: return "IB";
  }
}

// Reads one GID table entry with its type; false for empty or unreadable entries.
bool query_gid(ibv_context* ctx, const std::string& dev, int port, int index, GidChoice* out) {
  ibv_gid_entry e{};
  if (ibv_query_gid_ex(ctx, static_cast<uint32_t>(port), static_cast<uint32_t>(index), &e, 0) == 0) {
    out->gid = e.gid;
    out->type = gid_type_name(e.gid_type);
  } else {
    // Older kernels: the plain query and the type from sysfs.
    if (ibv_query_gid(ctx, static_cast<uint8_t>(port), index, &out->gid) != 0) return false;
    std::string t = read_line("/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) +
                              "/gid_attrs/types/" + std::to_string(index));
    out->type = t.find("v2") != std::string::npos ? "RoCE v2"
                : t.find("RoCE") != std::string::npos ? "RoCE v1"
                                                      : "IB";
  }
  out->index = index;
  static const uint8_t zero[16] = {};
  return std::memcmp(out->gid.raw, zero, 16) != 0;
}

bool ipv4_mapped(const ibv_gid& g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, prefix, 12) == 0;
}

GidChoice choose_gid(ibv_context* ctx, const std::string& dev, int port,
                     const ibv_port_attr& pa, int requested) {
  GidChoice c;
  if (requested >= 0) {
    if (requested >= pa.gid_tbl_len || !query_gid(ctx, dev, port, requested, &c))
      throw Error("--gid-index " + std::to_string(requested) + ": no GID at that index on " +
                  dev + " port " + std::to_string(port) + " (table of " +
                  std::to_string(pa.gid_tbl_len) + "; see ibv_devinfo -v)");
    return c;
  }
  // Best first: RoCE v2 with an IPv4-mapped address (routable, what PVRDMA and rxe set up
  // for an IPv4 interface), RoCE v2, RoCE v1 with IPv4, RoCE v1, anything.
  int best_score = -1;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    GidChoice g;
    if (!query_gid(ctx, dev, port, i, &g)) continue;
    int score = (g.type == "RoCE v2" ? 4 : g.type == "RoCE v1" ? 2 : 0) + (ipv4_mapped(g.gid) ? 1 : 0);
    if (score > best_score) {
      best_score = score;
      c = g;
    }
  }
  if (c.index < 0 && pa.link_layer == IBV_LINK_LAYER_ETHERNET)
    throw Error("device " + dev + " port " + std::to_string(port) +
                " has no GID (RoCE needs one: is an IP address configured on its netdev?)");
  return c;
}

std::string provider_of(const std::string& dev, const ibv_device_attr& da) {
  std::error_code ec;
  auto link = std::filesystem::read_symlink("/sys/class/infiniband/" + dev + "/device/driver", ec);
  if (!ec) return link.filename().string();
  if (dev.rfind("rxe", 0) == 0) return "rxe";  // Soft-RoCE has no parent PCI device
  if (dev.rfind("siw", 0) == 0) return "siw";
  return "vendor " + hex(da.vendor_id) + " part " + std::to_string(da.vendor_part_id);
}

double port_gbps(const ibv_port_attr& pa) {
  double lane = 0;
  switch (pa.active_speed) {
    case 1: lane = 2.5; break;
    case 2: lane = 5; break;
    case 4: case 8: lane = 10; break;
    case 16: lane = 14; break;
    case 32: lane = 25; break;
    case 64: lane = 50; break;
    case 128: lane = 100; break;
    default: break;
  }
  int width = 0;
  switch (pa.active_width) {
    case 1: width = 1; break;
    case 2: width = 4; break;
    case 4: width = 8; break;
    case 8: width = 12; break;
    case 16: width = 2; break;
    default: break;
  }
  return lane * width;
}

int mtu_bytes(uint32_t mtu) { return 128 << mtu; }  // IBV_MTU_256 = 1

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

// ---- requests and buffers --------------------------------------------------------------

struct ReqState : transport_core::ReqState {
  std::vector<ibv_sge> sges;
};
using ReqPtr = std::shared_ptr<ReqState>;

class VerbsBuffer : public Buffer {
 public:
  VerbsBuffer(std::shared_ptr<Device> dev, const void* owner, void* data, size_t bytes,
              size_t chunk)
      : Buffer(data, bytes, MemKind::host), dev_(std::move(dev)), owner_(owner), chunk_(chunk) {
    for (size_t off = 0; off < bytes; off += chunk) {
      size_t n = std::min(chunk, bytes - off);
      ibv_mr* mr = ibv_reg_mr(dev_->pd, static_cast<char*>(data) + off, n, IBV_ACCESS_LOCAL_WRITE);
      if (!mr) {
        int err = errno;
        release();
        throw Error("ibv_reg_mr of " + std::to_string(n) + " bytes (chunk " +
                    std::to_string(mrs_.size()) + " of a " + std::to_string(bytes) +
                    "-byte buffer) on " + dev_->name + " failed: " + std::strerror(err) +
                    (err == ENOMEM ? " (locked-memory limit? see ulimit -l)" : ""));
      }
      mrs_.push_back(mr);
    }
  }
  ~VerbsBuffer() override { release(); }
  const void* owner() const { return owner_; }
  size_t chunk() const { return chunk_; }
  const std::vector<ibv_mr*>& mrs() const { return mrs_; }

 private:
  void release() {
    for (ibv_mr* mr : mrs_) ibv_dereg_mr(mr);
    mrs_.clear();
  }
  std::shared_ptr<Device> dev_;
  const void* owner_;
  size_t chunk_;
  std::vector<ibv_mr*> mrs_;
};

// ---- transport -------------------------------------------------------------------------

class VerbsTransport : public transport_core::TransportCore<ReqState> {
 public:
  VerbsTransport(Store& store, int rank, int size, const VerbsOptions& opts);
  ~VerbsTransport() override;

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
  std::vector<ibv_sge> sg_list(const Buffer& buf, size_t offset, size_t length) const;
  void check_verbs_args(int peer, const Buffer& buf, size_t offset, size_t length) const;

  // All below run with mu_ held.
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
  int fl = ::fcntl(channel_->fd, F_GETFL);
  check_errno(fl >= 0 && ::fcntl(channel_->fd, F_SETFL, fl | O_NONBLOCK) == 0, "fcntl");
  send_depth_ = std::min(kMaxSendWr, depth_);
  int cqe = static_cast<int>(peers * (depth_ + send_depth_ + kCtrlRecvSlots + kCtrlSendSlots));
  cq_ = ibv_create_cq(dev_->ctx, std::min(cqe, dev_attr_.max_cqe), nullptr, channel_, 0);
  check_errno(cq_ != nullptr, "ibv_create_cq of " + std::to_string(cqe) + " entries on " + dev_->name);

  ctrl_mem_.assign(static_cast<size_t>(size_) * (kCtrlRecvSlots + kCtrlSendSlots) * kCtrlMsgBytes, 0);
  ctrl_mr_ = ibv_reg_mr(dev_->pd, ctrl_mem_.data(), ctrl_mem_.size(), IBV_ACCESS_LOCAL_WRITE);
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
    if (pending && !fatal_)
      fail(std::make_exception_ptr(
          IoError(-1, me() + ": the transport was closed with transfers still pending")));
    // Say goodbye, so that peers do not take our vanishing QPs for a death, and wait
    // (bounded) until the control sends are acknowledged.
    for (int r = 0; r < size_; ++r)
      if (r != rank_ && !peers_[static_cast<size_t>(r)].left) post_ctrl(r, kBye);
    auto limit = std::min<milliseconds>(opts_.timeout, std::chrono::seconds(fatal_ ? 1 : 5));
    cv_.wait_for(lk, limit, [&] { return ctrl_idle(); });
  }
  stop_ = true;
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
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

std::unique_ptr<Buffer> VerbsTransport::register_buffer(void* data, size_t bytes, MemKind kind) {
  if (kind != MemKind::host)
    throw Error("the verbs transport takes host memory only (no GPUDirect RDMA yet)");
  return std::make_unique<VerbsBuffer>(dev_, this, data, bytes, chunk_);
}

// The common checks, and a message no longer than the port takes.
void VerbsTransport::check_verbs_args(int peer, const Buffer& buf, size_t offset, size_t length) const {
  check_args(peer, buf, offset, length);
  if (length > port_attr_.max_msg_sz)
    throw Error(me() + ": a " + std::to_string(length) + "-byte message exceeds " + dev_->name +
                "'s maximum of " + std::to_string(port_attr_.max_msg_sz) + " bytes");
}

// One SGE per memory region the range crosses.
std::vector<ibv_sge> VerbsTransport::sg_list(const Buffer& buf, size_t offset, size_t length) const {
  auto* vb = dynamic_cast<const VerbsBuffer*>(&buf);
  if (!vb || vb->owner() != this)
    throw Error(me() + ": buffer was not registered with this verbs transport");
  std::vector<ibv_sge> v;
  const size_t chunk = vb->chunk();
  const size_t nsge = length == 0 ? 0 : (offset + length - 1) / chunk - offset / chunk + 1;
  if (nsge > max_sge_)
    throw Error(me() + ": a " + std::to_string(length) + "-byte transfer spans " +
                std::to_string(nsge) + " memory regions of " + std::to_string(chunk) +
                " bytes, more than the " + std::to_string(max_sge_) + " scatter/gather entries " +
                dev_->name + " allows: use a larger --mr-chunk or smaller segments");
  v.reserve(nsge);
  auto* base = static_cast<char*>(buf.data());
  while (length > 0) {
    size_t i = offset / chunk;
    size_t n = std::min(length, chunk - (offset - i * chunk));
    v.push_back({reinterpret_cast<uint64_t>(base + offset), static_cast<uint32_t>(n),
                 vb->mrs()[i]->lkey});
    offset += n;
    length -= n;
  }
  return v;
}

std::unique_ptr<Request> VerbsTransport::isend(int peer, const Buffer& buf, size_t offset,
                                               size_t length, uint64_t tag) {
  check_verbs_args(peer, buf, offset, length);
  auto r = std::make_shared<ReqState>();
  r->peer = peer;
  r->is_send = true;
  r->length = length;
  r->tag = tag;
  r->sges = sg_list(buf, offset, length);
  std::lock_guard lk(mu_);
  if (fatal_) std::rethrow_exception(fatal_);
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.left) throw IoError(peer, me() + ": cannot send to " + who(peer) + ": it has left the job");
  if (may_send(p) && p.sends_waiting.empty())
    post_data(peer, r);
  else
    p.sends_waiting.push_back(r);
  return make_request(r);
}

std::unique_ptr<Request> VerbsTransport::irecv(int peer, Buffer& buf, size_t offset,
                                               size_t length, uint64_t tag) {
  check_verbs_args(peer, buf, offset, length);
  auto r = std::make_shared<ReqState>();
  r->peer = peer;
  r->length = length;
  r->tag = tag;
  r->sges = sg_list(buf, offset, length);
  std::lock_guard lk(mu_);
  if (fatal_) std::rethrow_exception(fatal_);
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.left) throw IoError(peer, me() + ": cannot receive from " + who(peer) + ": it has left the job");
  if (p.recvs_posted.size() < depth_ && p.recvs_waiting.empty()) {
    post_data(peer, r);
    announce_recvs(peer);
  } else {
    p.recvs_waiting.push_back(r);
  }
  return make_request(r);
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

void VerbsTransport::abort(const std::string& reason) noexcept {
  try {
    std::lock_guard lk(mu_);
    if (!fatal_) fail(std::make_exception_ptr(IoError(-1, me() + " aborted: " + reason)));
    for (int r = 0; r < size_; ++r)
      if (r != rank_ && !peers_[static_cast<size_t>(r)].left) post_ctrl(r, kAbort, reason);
  } catch (...) {
  }
}

// ---- completion ------------------------------------------------------------------------

bool VerbsTransport::test(const ReqPtr& r) {
  std::lock_guard lk(mu_);
  if (r->status == ReqState::kPending) poll_cq();
  if (r->status == ReqState::kFailed) std::rethrow_exception(r->error);
  return r->status == ReqState::kDone;
}

void VerbsTransport::wait(const ReqPtr& r, milliseconds timeout) {
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  const auto spin_end = start + opts_.spin;
  std::unique_lock lk(mu_);
  while (r->status == ReqState::kPending) {
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
  if (r->status == ReqState::kFailed) std::rethrow_exception(r->error);
  if (r->status == ReqState::kDone) return;
  const Peer& p = peers_[static_cast<size_t>(r->peer)];
  double heard = seconds(Clock::now() - p.last_rx);
  throw transport_core::timeout_error(me(), who(r->peer), *r, timeout, heard, opts_.timeout, "", false);
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

}  // namespace

std::vector<std::string> verbs_device_names() { return DeviceList().names(); }

std::vector<RdmaPort> rdma_inventory() {
  std::vector<RdmaPort> out;
  DeviceList devs;
  for (int i = 0; devs.list && i < devs.n; ++i) {
    Device dev;
    dev.name = ibv_get_device_name(devs.list[i]);
    dev.ctx = ibv_open_device(devs.list[i]);
    ibv_device_attr da{};
    if (!dev.ctx || ibv_query_device(dev.ctx, &da) != 0) {
      RdmaPort p;
      p.device = dev.name;
      p.error = std::string("cannot open or query: ") + std::strerror(errno);
      out.push_back(p);
      continue;
    }
    for (int port = 1; port <= da.phys_port_cnt; ++port) {
      RdmaPort p;
      p.device = dev.name;
      p.provider = provider_of(dev.name, da);
      p.port = port;
      ibv_port_attr pa{};
      if (ibv_query_port(dev.ctx, static_cast<uint8_t>(port), &pa) != 0) {
        p.error = "ibv_query_port failed";
        out.push_back(p);
        continue;
      }
      p.state = port_state_name(pa.state);
      p.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
      p.active_mtu = mtu_bytes(pa.active_mtu);
      const std::string attrs = "/sys/class/infiniband/" + dev.name + "/ports/" + std::to_string(port) + "/gid_attrs/ndevs/";
      for (int g = 0; g < pa.gid_tbl_len; ++g) {
        GidChoice c;
        if (query_gid(dev.ctx, dev.name, port, g, &c))
          p.gids.push_back({g, verbs_wire::gid_string(c.gid.raw), c.type, read_line(attrs + std::to_string(g))});
      }
      try {
        p.gid_index = choose_gid(dev.ctx, dev.name, port, pa, -1).index;
      } catch (const std::exception& e) {
        p.error = e.what();
      }
      out.push_back(p);
    }
  }
  return out;
}

std::unique_ptr<Transport> make_verbs_transport(Store& store, int rank, int size,
                                                const VerbsOptions& opts) {
  return std::make_unique<VerbsTransport>(store, rank, size, opts);
}

}  // namespace ringbench
