#include "collectives/transport/shm/shm_transport.h"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "collectives/transport/shm/shm_layout.h"
#include "collectives/transport/shm/shm_ring.h"
#include "collectives/transport/shm/shm_segment.h"
#include "collectives/transport/core/transport_core.h"

namespace ringbench {
namespace {

using namespace shm_layout;
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
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, Clock::duration d) {
  const auto ns = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

// Wakes the rank whose header is `h` if one of its threads sleeps (or always, when `force`).
// Pairs with ShmTransport::sleep(). `sleepers` is read with a read-modify-write (no fences: TSan
// does not model them): either it comes after the sleeper's increment and sees it, or before,
// and then the sleeper's increment reads from it and sees what we published before it.
void ring_bell(SegmentHeader& h, bool force = false) {
  if (!force && h.sleepers.fetch_add(0, std::memory_order_acq_rel) == 0) return;
  h.bell.fetch_add(1, std::memory_order_seq_cst);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&h.bell), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// ---- state ---------------------------------------------------------------------------------

struct ReqState : transport_core::ReqState {
  char* data = nullptr;
  size_t transferred = 0;  // payload bytes moved so far, for timeout messages
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
  std::unique_ptr<Request> isend(int peer, const Buffer& buf, size_t offset, size_t length,
                                 uint64_t tag) override;
  std::unique_ptr<Request> irecv(int peer, Buffer& buf, size_t offset, size_t length,
                                 uint64_t tag) override;
  void abort(const std::string& reason) noexcept override;

  bool test(const ReqPtr& r) override;
  void wait(const ReqPtr& r, milliseconds timeout) override;

 private:
  void connect(Store& store);
  void attach_rings(Peer& p);
  std::string who(int peer) const override {
    return "rank " + std::to_string(peer) + " (shm pid " + std::to_string(peers_[peer].proc.pid) + ")";
  }
  SegmentHeader& own() const { return own_.header(); }
  std::string single_copy_summary() const;

  // All below run with mu_ held.
  bool progress();
  bool pump_out(Peer& p);
  bool pump_in(Peer& p);
  bool read_header(Peer& p);
  bool match(Peer& p);
  size_t read_payload(Peer& p, ReqState& r);
  void ack(Peer& p);
  bool collect_acks(Peer& p);
  void check_flags(Peer& p);
  void check_left(Peer& p);
  void check_alive(Peer& p, Clock::time_point now);
  bool process_gone(const Peer& p) const;
  void corrupt(Peer& p, const std::string& what);
  void publish_abort(const std::string& reason);
  void complete(const ReqPtr& r) { r->status = ReqState::kDone; }
  void fail(std::exception_ptr e) override;
  bool has_pending() const;
  void sleep(std::unique_lock<std::mutex>& lk, const ReqState& r, Clock::time_point until);
  void housekeeping();

  ShmOptions opts_;
  milliseconds heartbeat_;
  Segment own_;
  std::vector<Peer> peers_;
  uint64_t pid_ns_ = 0;
  // The housekeeper sleeps on its own lock, so that its heartbeat never waits for mu_.
  std::mutex hk_mu_;
  std::condition_variable hk_cv_;
  bool hk_stop_ = false;
  std::thread housekeeper_;
};

// ---- setup ---------------------------------------------------------------------------------

void check_options(const ShmOptions& o, int size) {
  const size_t rb = o.ring_bytes;
  if (rb < kMinRingBytes || rb > kMaxRingBytes || (rb & (rb - 1)) != 0)
    throw Error("shm ring_bytes must be a power of two from 4 KiB to 1 GiB, got " + std::to_string(rb));
  if (o.job_id.size() >= kJobIdBytes) throw Error("job id longer than 63 characters: '" + o.job_id + "'");
  if (o.timeout <= milliseconds::zero()) throw Error("shm timeout must be positive");
  if (size > kMaxRanks) throw Error("the shm transport takes at most " + std::to_string(kMaxRanks) + " ranks");
}

ShmTransport::ShmTransport(Store& store, int rank, int size, const ShmOptions& opts)
    : TransportCore(rank, size), opts_(opts), peers_(static_cast<size_t>(size)) {
  check_options(opts, size);
  heartbeat_ = std::clamp(opts.timeout / 8, milliseconds(10), milliseconds(1000));
  pid_ns_ = shm_segment::pid_namespace();
  own_ = Segment::create(opts.job_id, rank, size, opts.ring_bytes);
  connect(store);  // on failure, own_ removes the segment as it goes
  caps_ = {"shm", true, false, 0};
  path_ = {{"transport", "shm"},
           {"ring_bytes", std::to_string(opts.ring_bytes)},
           {"wakeup", "futex"},
           {"spin_us", std::to_string(opts.spin.count())},
           {"single_copy", single_copy_summary()},
           {"heartbeat_ms", std::to_string(heartbeat_.count())},
           {"segment_mib", std::to_string(segment_bytes(size, opts.ring_bytes) >> 20)}};
  housekeeper_ = std::thread([this] { housekeeping(); });
}

// Publishes our segment's name, maps every peer's, and once every rank has mapped every segment
// removes our name: from then on nothing is left in /dev/shm, whatever happens to the processes.
void ShmTransport::connect(Store& store) {
  const std::string key = opts_.key_prefix + "/segment/";
  store.set(key + std::to_string(rank_), own_.name());
  const size_t bytes = segment_bytes(size_, opts_.ring_bytes);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    Peer& p = peers_[r];
    p.rank = r;
    std::string name;
    try {
      name = store.get(key + std::to_string(r), opts_.timeout);
      p.seg = Segment::open(name, bytes, r);
      p.proc = shm_segment::validate_header(p.seg, r, size_, opts_.ring_bytes, opts_.job_id);
    } catch (const TimeoutError& e) {
      throw TimeoutError(r, me() + ": rank " + std::to_string(r) + " did not publish its shared-memory segment: " + e.what());
    } catch (const IoError& e) {
      throw IoError(r, me() + ": rank " + std::to_string(r) + ": " + e.what());
    }
    attach_rings(p);
    // Tell it whether we can read its memory; it learns it after the barrier.
    p.cma_in = opts_.single_copy_bytes > 0 && shm_segment::can_read_memory_of(p.proc);
    p.in_ctl->cma_ok.store(p.cma_in ? 1 : 0, std::memory_order_release);
  }
  store_barrier(store, opts_.key_prefix + "/mapped", size_, opts_.timeout);
  own_.unlink();
  // Silence counts from the end of setup: a slow rank's setup is not a peer's silence, and no
  // housekeeper beat before now.
  const auto now = Clock::now();
  for (auto& p : peers_)
    if (p.hdr) p.beat_at = now, p.last_beat = p.hdr->heartbeat.load(std::memory_order_acquire);
  for (auto& p : peers_)
    if (p.hdr) p.cma_out = opts_.single_copy_bytes > 0 && p.out_ctl->cma_ok.load(std::memory_order_acquire) == 1;
}

void ShmTransport::attach_rings(Peer& p) {
  const size_t rb = opts_.ring_bytes;
  p.hdr = &p.seg.header();
  const size_t out_slot = ring_slot(rank_, p.rank), in_slot = ring_slot(p.rank, rank_);
  p.out_ctl = p.seg.control(out_slot);
  p.in_ctl = own_.control(in_slot);
  p.out.attach(p.out_ctl, p.seg.ring(out_slot, size_, rb), rb);
  p.in.attach(p.in_ctl, own_.ring(in_slot, size_, rb), rb);
  p.beat_at = Clock::now();
  p.last_beat = p.hdr->heartbeat.load(std::memory_order_acquire);
}

ShmTransport::~ShmTransport() {
  {
    std::lock_guard lk(mu_);
    // Requests still pending now will never be waited for: stop using their buffers.
    if (has_pending() && !fatal_)
      fail(std::make_exception_ptr(IoError(-1, me() + ": the transport was closed with transfers still pending")));
    // What we sent is in the receivers' segments already: nothing to flush, only to say goodbye.
    own().flags.fetch_or(kBye, std::memory_order_release);
  }
  for (auto& p : peers_)
    if (p.hdr) ring_bell(*p.hdr, true);
  {
    std::lock_guard hk(hk_mu_);
    hk_stop_ = true;
  }
  hk_cv_.notify_all();
  housekeeper_.join();
}

// "cma >= 65536 bytes" when every peer reads our large messages out of our memory (and we
// theirs), "off" when none does, "cma with k of n pairs" in between.
std::string ShmTransport::single_copy_summary() const {
  int pairs = 0, cma = 0;
  for (auto& p : peers_)
    if (p.hdr) {
      pairs += 2;
      cma += int{p.cma_in} + int{p.cma_out};
    }
  const std::string min = " >= " + std::to_string(opts_.single_copy_bytes) + " bytes";
  if (cma == 0) return "off";
  return cma == pairs ? "cma" + min : "cma" + min + " on " + std::to_string(cma) + " of " + std::to_string(pairs) + " directed pairs";
}

// ---- posting -------------------------------------------------------------------------------

std::unique_ptr<Buffer> ShmTransport::register_buffer(void* data, size_t bytes, MemKind kind) {
  if (kind != MemKind::host)
    throw Error("the shm transport takes host memory only: stage device buffers through host memory");
  return std::make_unique<Buffer>(data, bytes, kind);
}

std::unique_ptr<Request> ShmTransport::isend(int peer, const Buffer& buf, size_t offset, size_t length,
                                             uint64_t tag) {
  check_args(peer, buf, offset, length);
  auto r = std::make_shared<ReqState>();
  r->peer = peer;
  r->is_send = true;
  r->length = length;
  r->tag = tag;
  r->data = static_cast<char*>(buf.data()) + offset;  // only read from
  std::lock_guard lk(mu_);
  if (fatal_) std::rethrow_exception(fatal_);
  Peer& p = peers_[peer];
  if (p.said_bye) throw IoError(peer, me() + ": cannot send to " + who(peer) + ": it has left the job");
  SendItem item;
  item.req = r;
  const bool single_copy = p.cma_out && length >= opts_.single_copy_bytes;
  item.hdr = {single_copy ? kFrameMagicCma : kFrameMagic, p.send_seq++, tag, length,
              single_copy ? reinterpret_cast<uintptr_t>(r->data) : 0};
  p.sendq.push_back(std::move(item));
  if (p.sendq.size() == 1) pump_out(p);  // at once: most messages fit, and then nobody waits
  return make_request(r);
}

std::unique_ptr<Request> ShmTransport::irecv(int peer, Buffer& buf, size_t offset, size_t length,
                                             uint64_t tag) {
  check_args(peer, buf, offset, length);
  auto r = std::make_shared<ReqState>();
  r->peer = peer;
  r->length = length;
  r->tag = tag;
  r->data = static_cast<char*>(buf.data()) + offset;
  std::lock_guard lk(mu_);
  if (fatal_) std::rethrow_exception(fatal_);
  Peer& p = peers_[peer];
  p.recvq.push_back(r);
  if (p.recvq.size() == 1) pump_in(p);  // the message may be waiting already
  return make_request(r);
}

void ShmTransport::abort(const std::string& reason) noexcept {
  try {
    std::lock_guard lk(mu_);
    if (!fatal_) fail(std::make_exception_ptr(IoError(-1, me() + " aborted: " + reason)));
    publish_abort(reason);
  } catch (...) {
  }
}

// Tells every peer that this rank aborted, and why (the first reason stays). Called with mu_ held.
void ShmTransport::publish_abort(const std::string& reason) {
  SegmentHeader& h = own();
  if (!(h.flags.load(std::memory_order_relaxed) & kAborted)) {
    const size_t n = std::min(reason.size(), kMaxAbortText);
    std::memcpy(h.abort_text, reason.data(), n);
    h.abort_len = static_cast<uint32_t>(n);
    h.flags.fetch_or(kAborted, std::memory_order_release);
  }
  for (auto& p : peers_)
    if (p.hdr) ring_bell(*p.hdr, true);
}

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
    const bool single_copy = it.hdr.magic == kFrameMagicCma;
    const size_t total = kFrameBytes + (single_copy ? 0 : it.req->length);
    while (it.sent < total) {
      const size_t n = it.sent < kFrameBytes
                           ? p.out.write(reinterpret_cast<const char*>(&it.hdr) + it.sent, kFrameBytes - it.sent)
                           : p.out.write(it.req->data + (it.sent - kFrameBytes),
                                         std::min(total - it.sent, kPublishBytes));
      if (n == kCorrupt) {
        corrupt(p, "its ring's tail is outside the ring");
        return moved;
      }
      if (n == 0) break;
      it.sent += n;
      it.req->transferred = it.sent > kFrameBytes ? it.sent - kFrameBytes : 0;
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
    if (p.in.unpublished() >= kPublishBytes) {
      p.in.publish();
      ring_bell(*p.hdr);  // the writer may be waiting for room
    }
    if (p.got == r.length) {
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
// memory. Returns the bytes read, or kCorrupt once the transport failed.
size_t ShmTransport::read_payload(Peer& p, ReqState& r) {
  if (!p.rx_cma) {
    const size_t n = p.in.read(r.data + p.got, std::min(r.length - p.got, kPublishBytes));
    if (n == kCorrupt) corrupt(p, "its ring's head is outside the ring");
    return n;
  }
  const size_t want = std::min(r.length - p.got, kCmaPieceBytes);
  iovec local{r.data + p.got, want};
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

// ---- completion ----------------------------------------------------------------------------

bool ShmTransport::test(const ReqPtr& r) {
  std::lock_guard lk(mu_);
  if (r->status == ReqState::kPending) progress();
  if (r->status == ReqState::kFailed) std::rethrow_exception(r->error);
  return r->status == ReqState::kDone;
}

void ShmTransport::wait(const ReqPtr& r, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::unique_lock lk(mu_);
  auto spin_end = Clock::now() + opts_.spin;
  while (r->status == ReqState::kPending) {
    // Spin while data flows; sleep once nothing has moved for `spin`.
    if (progress()) spin_end = Clock::now() + opts_.spin;
    const auto now = Clock::now();
    if (r->status != ReqState::kPending || now >= deadline) break;
    if (now < spin_end) {
      lk.unlock();
      sched_yield();
      lk.lock();
    } else {
      sleep(lk, *r, std::min(deadline, now + heartbeat_));
    }
  }
  if (r->status == ReqState::kFailed) std::rethrow_exception(r->error);
  if (r->status == ReqState::kDone) return;
  const Peer& p = peers_[r->peer];
  throw transport_core::timeout_error(me(), who(r->peer), *r, timeout, seconds(Clock::now() - p.beat_at),
                                     opts_.timeout, " (" + std::to_string(r->transferred) + " moved)",
                                     r->transferred > 0);
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

}  // namespace

std::unique_ptr<Transport> make_shm_transport(Store& store, int rank, int size, const ShmOptions& opts) {
  return std::make_unique<ShmTransport>(store, rank, size, opts);
}

}  // namespace ringbench
