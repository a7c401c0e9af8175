// The shm transport's internals, shared by its files: the futex doorbell, the state, ShmTransport.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/store.h"
#include "collectives/transport.h"
#include "collectives/transport/core/transport_core.h"
#include "collectives/transport/shm/shm_layout.h"
#include "collectives/transport/shm/shm_ring.h"
#include "collectives/transport/shm/shm_segment.h"
#include "collectives/transport/shm/shm_transport.h"

namespace ringbench::shm_detail {

using namespace shm_layout;
using shm_ring::kAlign;
using shm_ring::kCorrupt;
using shm_segment::Segment;
using std::chrono::milliseconds;
using transport_core::Clock;
using transport_core::fmt_s;
using transport_core::seconds;

// Data is copied and published in pieces of at most this much, so that the reader can start on
// a large message while the writer is still copying it in.
constexpr size_t kPublishBytes = size_t{128} << 10;
// A single-copy payload is read in pieces of at most this much, so other peers' transfers move
// in between.
constexpr size_t kCmaPieceBytes = size_t{1} << 20;
constexpr size_t kFrameBytes = sizeof(FrameHeader);

// ---- futex doorbell ------------------------------------------------------------------------

// Shared (not FUTEX_PRIVATE) futexes: the word lives in memory mapped by several processes.
inline void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, Clock::duration d) {
  const auto ns = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

// Wakes the rank whose header is `h` if one of its threads sleeps (or always, when `force`).
// Pairs with ShmTransport::sleep(). `sleepers` is read with a read-modify-write (no fences: TSan
// does not model them): either it comes after the sleeper's increment and sees it, or before,
// and then the sleeper's increment reads from it and sees what we published before it.
inline void ring_bell(SegmentHeader& h, bool force = false) {
  if (!force && h.sleepers.fetch_add(0, std::memory_order_acq_rel) == 0) return;
  h.bell.fetch_add(1, std::memory_order_seq_cst);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&h.bell), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// ---- state ---------------------------------------------------------------------------------

// A transfer. A forward (irecv_forward) is a receive and a send, linked: the received payload is
// written into the send's ring as it arrives where the send is first in line and the ring has
// room at that moment (fused), else into `data` (home) and sent from there later.
struct ReqState : transport_core::ReqState {
  std::shared_ptr<ReqState> fwd_send;  // a forward's receive: its send
  bool forwarded = false;              // a forward's send: its payload comes as it is received
  size_t fwd_ready = 0;                // a forward's send: payload bytes received (in the ring or home)
};
using ReqPtr = std::shared_ptr<ReqState>;

struct SendItem {
  ReqPtr req;
  FrameHeader hdr{};
  size_t sent = 0;  // bytes of header + payload written so far
};

// A peer: its mapped segment, the ring we write into (in its segment) and the one it writes
// into (in ours), with the transfers queued on each.
struct Peer {
  int rank = -1;
  Segment seg;
  SegmentHeader* hdr = nullptr;
  shm_segment::PeerProcess proc;

  shm_ring::RingWriter out;
  RingControl* out_ctl = nullptr;
  std::deque<SendItem> sendq;
  uint32_t send_seq = 0;
  bool cma_out = false;          // it reads our large messages out of our memory
  std::deque<ReqPtr> unacked;    // single-copy sends whose header is out, not yet read
  uint64_t cma_sent = 0, cma_done = 0;

  shm_ring::RingReader in;
  RingControl* in_ctl = nullptr;
  bool cma_in = false;  // we can read its memory (and told it so)
  bool rx_cma = false;  // the current message is single-copy
  uint64_t cma_read = 0;
  std::vector<char> bounce;  // a single-copy piece on its way to a receive's sink
  std::deque<ReqPtr> recvq;  // posted receives, matched in order
  // kAwaitingRecv: a header was read and waits for its receive to be posted.
  enum Rx { kHeader, kAwaitingRecv, kPayload } rx = kHeader;
  FrameHeader rx_hdr{};
  size_t got = 0;  // bytes of the current header or payload
  ReqPtr cur;
  uint32_t recv_seq = 0;

  uint64_t last_beat = 0;
  Clock::time_point beat_at;  // when last_beat last changed
  bool said_bye = false;
};

class ShmTransport : public transport_core::TransportCore<ReqState> {
 public:
  ShmTransport(Store& store, int rank, int size, const ShmOptions& opts);
  ~ShmTransport() override;

  std::unique_ptr<Buffer> register_buffer(void* data, size_t bytes, MemKind kind) override;

 private:
  void connect(Store& store);
  void attach_rings(Peer& p);
  std::string who(int peer) const override {
    return "rank " + std::to_string(peer) + " (shm pid " + std::to_string(peers_[peer].proc.pid) + ")";
  }
  SegmentHeader& own() const { return own_.header(); }
  std::string single_copy_summary() const;

  // All below run with mu_ held. TransportCore's hooks first.
  void post(const ReqPtr& r) override;
  void post_forward(const ReqPtr& recv, const ReqPtr& send) override;
  void advance(ReqState&) override { progress(); }
  void await(std::unique_lock<std::mutex>& lk, ReqState& r, Clock::time_point deadline) override;
  TimeoutError timed_out(const ReqState& r, milliseconds waited) const override;
  void publish_abort(const std::string& reason) override;
  bool progress();
  bool pump_out(Peer& p);
  bool pump_in(Peer& p);
  bool read_header(Peer& p);
  bool match(Peer& p);
  size_t read_payload(Peer& p, ReqState& r);
  std::pair<const char*, size_t> next_piece(Peer& p, const ReqState& r);
  size_t sink_payload(Peer& p, ReqState& r);
  size_t forward_payload(Peer& p, ReqState& r);
  bool can_fuse(Peer& q, const ReqState& send) const;
  void publish_fused();
  size_t read_cma(Peer& p, char* dst, size_t n);
  bool hand_over(Peer& p, const char* failed, const std::function<void()>& take);
  void ack(Peer& p);
  bool collect_acks(Peer& p);
  void check_flags(Peer& p);
  void check_left(Peer& p);
  void check_alive(Peer& p, Clock::time_point now);
  bool process_gone(const Peer& p) const;
  void corrupt(Peer& p, const std::string& what);
  void complete(const ReqPtr& r) { r->status = ReqState::kDone; }
  void fail(std::exception_ptr e) override;
  bool has_pending() const;
  void sleep(std::unique_lock<std::mutex>& lk, const ReqState& r, Clock::time_point until);
  void housekeeping();

  ShmOptions opts_;
  milliseconds heartbeat_;
  Segment own_;
  std::vector<Peer> peers_;
  Peer* fused_to_ = nullptr;  // a ring that pump_in wrote into, to publish when it returns
  uint64_t pid_ns_ = 0;
  // The housekeeper sleeps on its own lock, so that its heartbeat never waits for mu_.
  std::mutex hk_mu_;
  std::condition_variable hk_cv_;
  bool hk_stop_ = false;
  std::thread housekeeper_;
};

}  // namespace ringbench::shm_detail
