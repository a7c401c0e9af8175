// The shm transport's setup (segments, rings, single copy), closing, posting; make_shm_transport.
#include "collectives/transport/shm/shm_transport.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/errors.h"
#include "collectives/transport/shm/shm_internal.h"

namespace ringbench {
namespace shm_detail {

// ---- setup ---------------------------------------------------------------------------------

namespace {

void check_options(const ShmOptions& o, int size) {
  const size_t rb = o.ring_bytes;
  if (rb < kMinRingBytes || rb > kMaxRingBytes || (rb & (rb - 1)) != 0)
    throw Error("shm ring_bytes must be a power of two from 4 KiB to 1 GiB, got " + std::to_string(rb));
  if (o.job_id.size() >= kJobIdBytes) throw Error("job id longer than 63 characters: '" + o.job_id + "'");
  if (o.timeout <= milliseconds::zero()) throw Error("shm timeout must be positive");
  if (size > kMaxRanks) throw Error("the shm transport takes at most " + std::to_string(kMaxRanks) + " ranks");
}

}  // namespace

ShmTransport::ShmTransport(Store& store, int rank, int size, const ShmOptions& opts)
    : TransportCore(rank, size), opts_(opts), peers_(static_cast<size_t>(size)) {
  check_options(opts, size);
  heartbeat_ = std::clamp(opts.timeout / 8, milliseconds(10), milliseconds(1000));
  pid_ns_ = shm_segment::pid_namespace();
  own_ = Segment::create(opts.job_id, rank, size, opts.ring_bytes);
  connect(store);  // on failure, own_ removes the segment as it goes
  const bool forward = opts.reduce_in_ring && opts.forward;
  caps_ = {"shm", true, false, 0, opts.reduce_in_ring, forward, forward ? opts.ring_bytes / 4 : 0};
  path_ = {{"transport", "shm"},
           {"ring_bytes", std::to_string(opts.ring_bytes)},
           {"wakeup", "futex"},
           {"spin_us", std::to_string(opts.spin.count())},
           {"single_copy", single_copy_summary()},
           {"reduce", !opts.reduce_in_ring ? "after a copy" : opts.forward ? "on the way to the next rank" : "from the ring"},
           {"heartbeat_ms", std::to_string(heartbeat_.count())},
           {"segment_mib", std::to_string(segment_bytes(size, opts.ring_bytes) >> 20)}};
  if (forward) path_["forward_bytes"] = std::to_string(caps_.forward_bytes);
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
    fail_pending_at_close(has_pending());
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

// A send goes into the ring at once when it is first in line: most messages fit, and then
// nobody waits. A receive looks at once too: the message may be waiting already.
void ShmTransport::post(const ReqPtr& r) {
  Peer& p = peers_[r->peer];
  if (!r->is_send) {
    p.recvq.push_back(r);
    if (p.recvq.size() == 1) pump_in(p);
    return;
  }
  if (p.said_bye) throw left_job(*r);
  SendItem item;
  item.req = r;
  const bool single_copy = p.cma_out && r->length >= opts_.single_copy_bytes;
  item.hdr = {single_copy ? kFrameMagicCma : kFrameMagic, p.send_seq++, r->tag, r->length,
              single_copy ? reinterpret_cast<uintptr_t>(r->data) : 0};
  p.sendq.push_back(std::move(item));
  if (p.sendq.size() == 1) pump_out(p);
}

// The send goes in line (never single-copy: it is written as it arrives), then the receive.
void ShmTransport::post_forward(const ReqPtr& recv, const ReqPtr& send) {
  Peer& q = peers_[send->peer];
  if (q.said_bye) throw left_job(*send);
  send->forwarded = true;
  recv->fwd_send = send;
  q.sendq.push_back({send, {kFrameMagic, q.send_seq++, send->tag, send->length, 0}, 0});
  if (q.sendq.size() == 1) pump_out(q);
  post(recv);
}

// Tells every peer that this rank aborted, and why (the first reason stays).
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

}  // namespace shm_detail

std::unique_ptr<Transport> make_shm_transport(Store& store, int rank, int size, const ShmOptions& opts) {
  return std::make_unique<shm_detail::ShmTransport>(store, rank, size, opts);
}

}  // namespace ringbench
