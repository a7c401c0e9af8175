#include "runner/remote/transport_channel.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/errors.h"

namespace ringbench::remote {
namespace {

constexpr uint64_t kDescriptorTag = 0x5242445344455343;  // "RBDSDESC"
constexpr uint64_t kSegmentTag = 0x5242445353454731;     // "RBDSSEG1"
constexpr auto kSlice = std::chrono::milliseconds(100);

std::string ms_text(Millis t) { return std::to_string(t.count()) + " ms"; }

}  // namespace

TransportChannel::TransportChannel(std::unique_ptr<Transport> t, int fd, std::string peer, bool says_goodbye,
                                   Millis close_timeout)
    : t_(std::move(t)),
      fd_(fd),
      peer_(std::move(peer)),
      says_goodbye_(says_goodbye),
      close_timeout_(close_timeout),
      other_(1 - t_->rank()),
      mem_(kDescriptorBytes + kSlots * kSegmentBytes + kDescSlots * kDescriptorBytes + kSlots * kSegmentBytes) {
  if (t_->size() != 2) throw Error("a device link's transport joins 2 ranks, not " + std::to_string(t_->size()));
  buf_ = t_->register_buffer(mem_.data(), mem_.size());
}

TransportChannel::~TransportChannel() {
  try {
    const auto deadline = net::Clock::now() + std::min<Millis>(close_timeout_, std::chrono::seconds(5));
    if (!broken_ && !peer_left_) {
      flush(close_timeout_);
      if (says_goodbye_) send_descriptor('B', 0, deadline, close_timeout_);
    }
    if (!broken_) {  // the last sends, so that the peer reads all of them
      for (auto& r : desc_sends_) free_send(r, deadline, close_timeout_);
      for (auto& r : seg_sends_) free_send(r, deadline, close_timeout_);
    }
  } catch (const std::exception&) {
    // The peer is gone or slow: closing the transport below tells it, if it still listens.
  }
  segments_.clear();  // pending requests first (the transport then fails: it is being closed anyway)
  for (auto& r : desc_sends_) r.reset();
  for (auto& r : seg_sends_) r.reset();
  buf_.reset();
  t_.reset();
}

TransportChannel::Socket TransportChannel::socket_state() const {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return Socket::open;
  char c;
  const ssize_t r = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r > 0) return Socket::spoken;
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Socket::open;
  return Socket::closed;
}

void TransportChannel::vanished(const std::string& why) {
  broken_ = true;
  throw IoError(-1, peer_ + " vanished: " + why);
}

void TransportChannel::wait_for(Request& r, net::Clock::time_point deadline, const std::string& late) {
  for (;;) {
    const auto now = net::Clock::now();
    const auto slice = std::clamp<Millis>(std::chrono::duration_cast<Millis>(deadline - now), Millis(0), kSlice);
    try {
      r.wait(slice);
      return;
    } catch (const TimeoutError&) {
      // this slice is over
    } catch (const IoError& e) {
      vanished(e.what());
    }
    const Socket s = socket_state();
    if (s != Socket::open) {
      try {
        if (r.test()) return;  // it completed just before the peer closed
      } catch (const IoError& e) {
        vanished(e.what());
      }
      if (s == Socket::spoken) vanished("it sent bytes on the bootstrap connection, which must stay silent");
      vanished("its process is gone (the TCP connection of its bootstrap closed)");
    }
    if (net::Clock::now() >= deadline) {
      broken_ = true;
      throw TimeoutError(-1, peer_ + late);
    }
  }
}

// ---- reading ------------------------------------------------------------------------------

bool TransportChannel::read(void* p, size_t n, Millis timeout, bool at_boundary) {
  const auto deadline = net::Clock::now() + timeout;
  char* out = static_cast<char*>(p);
  const char* start = out;
  while (n > 0) {
    if (inline_at_ < inline_end_) {
      const size_t c = std::min(n, inline_end_ - inline_at_);
      std::memcpy(out, recv_descriptor() + inline_at_, c);
      inline_at_ += c;
      out += c;
      n -= c;
    } else if (bulk_unread_ > 0) {
      const size_t c = take_bulk(out, n, deadline, timeout);
      out += c;
      n -= c;
    } else if (!next_descriptor(deadline, at_boundary && out == start, timeout)) {
      return false;
    }
  }
  return true;
}

// The next descriptor: false for a goodbye at a boundary.
bool TransportChannel::next_descriptor(net::Clock::time_point deadline, bool at_boundary, Millis timeout) {
  if (broken_) throw IoError(-1, peer_ + ": the link failed earlier");
  if (peer_left_) throw IoError(-1, peer_ + " closed the link already");
  std::unique_ptr<Request> r;
  try {
    r = t_->irecv(other_, *buf_, 0, kDescriptorBytes, kDescriptorTag);
  } catch (const IoError& e) {
    vanished(e.what());
  }
  wait_for(*r, deadline,
           at_boundary ? " sent nothing for " + std::to_string(timeout.count() / 1000) + " s"
                       : " did not send the rest of a message within " + ms_text(timeout));
  std::string why;
  const auto h = decode_stream_header(recv_descriptor(), recv_seq_, &why);
  if (!h) {
    broken_ = true;
    throw IoError(-1, peer_ + ": " + why);
  }
  ++recv_seq_;
  if (h->kind == 'B') {
    peer_left_ = true;
    if (at_boundary) return false;
    throw IoError(-1, peer_ + " closed the link in the middle of a message");
  }
  inline_at_ = kStreamHeaderBytes;
  inline_end_ = kStreamHeaderBytes + h->inline_bytes;
  bulk_unposted_ = bulk_unread_ = h->bulk;
  post_segments();
  return true;
}

// Receives for the announced bulk, in order, while a slot is free. The next descriptor's receive
// is posted only after all of them (the transport matches in the order posted).
void TransportChannel::post_segments() {
  while (bulk_unposted_ > 0 && segments_.size() < size_t(kSlots)) {
    Segment s;
    s.slot = next_slot_++ % kSlots;
    s.length = size_t(std::min<uint64_t>(kSegmentBytes, bulk_unposted_));
    try {
      s.req = t_->irecv(other_, *buf_, size_t(recv_segment(s.slot) - mem_.data()), s.length, kSegmentTag);
    } catch (const IoError& e) {
      vanished(e.what());
    }
    bulk_unposted_ -= s.length;
    segments_.push_back(std::move(s));
  }
}

size_t TransportChannel::take_bulk(char* out, size_t n, net::Clock::time_point deadline, Millis timeout) {
  Segment& s = segments_.front();
  if (!s.arrived) {
    wait_for(*s.req, deadline, " did not send the rest of a message within " + ms_text(timeout));
    s.arrived = true;
  }
  const size_t c = std::min(n, s.length - s.taken);
  std::memcpy(out, recv_segment(s.slot) + s.taken, c);
  s.taken += c;
  bulk_unread_ -= c;
  if (s.taken == s.length) {
    segments_.pop_front();
    post_segments();
  }
  return c;
}

// ---- writing ------------------------------------------------------------------------------

void TransportChannel::write(const void* p, size_t n, Millis timeout) {
  const char* in = static_cast<const char*>(p);
  if (n <= kInlineBytes - pending_.size()) {
    pending_.append(in, n);
    return;
  }
  const auto deadline = net::Clock::now() + timeout;
  if (n <= kInlineBytes) {
    send_descriptor('D', 0, deadline, timeout);
    pending_.assign(in, n);
    return;
  }
  send_descriptor('D', n, deadline, timeout);  // what is gathered, and n bytes after it
  send_bulk(in, n, deadline, timeout);
}

void TransportChannel::flush(Millis timeout) {
  if (!pending_.empty()) send_descriptor('D', 0, net::Clock::now() + timeout, timeout);
}

void TransportChannel::free_send(std::unique_ptr<Request>& r, net::Clock::time_point deadline, Millis timeout) {
  if (!r) return;
  wait_for(*r, deadline, " took nothing of a message for " + ms_text(timeout));
  r.reset();
}

void TransportChannel::send_descriptor(char kind, uint64_t bulk, net::Clock::time_point deadline, Millis timeout) {
  if (broken_) throw IoError(-1, peer_ + ": the link failed earlier");
  const size_t slot = next_desc_++ % kDescSlots;
  free_send(desc_sends_[slot], deadline, timeout);
  char* d = mem_.data() + send_descriptor_offset(slot);
  encode(d, StreamHeader{kind, uint32_t(pending_.size()), bulk, send_seq_++});
  std::memcpy(d + kStreamHeaderBytes, pending_.data(), pending_.size());
  pending_.clear();
  try {
    desc_sends_[slot] = t_->isend(other_, *buf_, send_descriptor_offset(slot), kDescriptorBytes, kDescriptorTag);
  } catch (const IoError& e) {
    vanished(e.what());
  }
}

void TransportChannel::send_bulk(const char* p, size_t n, net::Clock::time_point deadline, Millis timeout) {
  while (n > 0) {
    const size_t slot = next_seg_++ % kSlots, c = std::min(n, kSegmentBytes);
    free_send(seg_sends_[slot], deadline, timeout);
    std::memcpy(mem_.data() + send_segment_offset(slot), p, c);
    try {
      seg_sends_[slot] = t_->isend(other_, *buf_, send_segment_offset(slot), c, kSegmentTag);
    } catch (const IoError& e) {
      vanished(e.what());
    }
    p += c;
    n -= c;
  }
}

}  // namespace ringbench::remote
