// The device protocol's byte stream over a two-rank message Transport (collectives/transport.h):
// the verbs transport's RC queue pairs in practice, any transport in the tests. The stream goes
// as descriptors (always kDescriptorBytes: up to kInlineBytes of it inline) and the bulk bytes a
// descriptor announces in segments (channel_wire.h), through memory registered once per end: one
// 1 KiB descriptor and 4 x 256 KiB of segments to receive into, 2 x 1 KiB and 4 x 256 KiB to send
// from (2 MiB). Writes are gathered until flush() or a write too long to gather, so a request or
// reply of header and small payload is one message; a reader posts the next descriptor's receive
// only when it needs one, so nothing is pending between requests. Every wait has a deadline, in
// slices of 100 ms between which the bootstrap's TCP socket (not owned) is looked at: its end
// means the peer's process is gone, an IoError at once instead of after the transport's own
// timeout. Errors are IoErrors naming the peer.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collectives/net.h"
#include "collectives/transport.h"
#include "runner/remote/channel.h"
#include "runner/remote/channel_wire.h"

namespace ringbench::remote {

class TransportChannel final : public Channel {
 public:
  // `t`: ranks 0 (the server) and 1 (the client). `says_goodbye`: this end closes the stream with
  // a goodbye when it is destroyed (the client: the server then reads the end of its requests);
  // `close_timeout` bounds that and the wait for the last sends.
  TransportChannel(std::unique_ptr<Transport> t, int fd, std::string peer, bool says_goodbye, Millis close_timeout);
  ~TransportChannel() override;
  TransportChannel(const TransportChannel&) = delete;
  TransportChannel& operator=(const TransportChannel&) = delete;

  bool read(void* p, size_t n, Millis timeout, bool at_boundary = false) override;
  void write(const void* p, size_t n, Millis timeout) override;
  void flush(Millis timeout) override;
  std::string peer() const override { return peer_; }
  std::map<std::string, std::string> path() const { return t_->path_info(); }

 private:
  static constexpr int kSlots = 4, kDescSlots = 2;
  struct Segment {
    std::unique_ptr<Request> req;
    size_t slot = 0, length = 0, taken = 0;
    bool arrived = false;
  };
  enum class Socket { open, closed, spoken };

  char* recv_descriptor() { return mem_.data(); }
  char* recv_segment(size_t slot) { return mem_.data() + kDescriptorBytes + slot * kSegmentBytes; }
  size_t send_offset() const { return kDescriptorBytes + kSlots * kSegmentBytes; }
  size_t send_descriptor_offset(size_t slot) const { return send_offset() + slot * kDescriptorBytes; }
  size_t send_segment_offset(size_t slot) const {
    return send_offset() + kDescSlots * kDescriptorBytes + slot * kSegmentBytes;
  }

  bool next_descriptor(net::Clock::time_point deadline, bool at_boundary, Millis timeout);
  size_t take_bulk(char* out, size_t n, net::Clock::time_point deadline, Millis timeout);
  void post_segments();
  void send_descriptor(char kind, uint64_t bulk, net::Clock::time_point deadline, Millis timeout);
  void send_bulk(const char* p, size_t n, net::Clock::time_point deadline, Millis timeout);
  void free_send(std::unique_ptr<Request>& r, net::Clock::time_point deadline, Millis timeout);
  // Waits for r until `deadline`; a timeout throws TimeoutError(peer_ + late).
  void wait_for(Request& r, net::Clock::time_point deadline, const std::string& late);
  Socket socket_state() const;
  [[noreturn]] void vanished(const std::string& why);

  std::unique_ptr<Transport> t_;  // first: destroyed after the buffer and the requests
  int fd_;
  std::string peer_;
  bool says_goodbye_;
  Millis close_timeout_;
  int other_;
  std::vector<char> mem_;
  std::unique_ptr<Buffer> buf_;
  bool broken_ = false, peer_left_ = false;
  // sending
  std::string pending_;  // gathered, at most kInlineBytes
  uint64_t send_seq_ = 0;
  std::unique_ptr<Request> desc_sends_[kDescSlots], seg_sends_[kSlots];
  size_t next_desc_ = 0, next_seg_ = 0;
  // receiving
  uint64_t recv_seq_ = 0;
  size_t inline_at_ = 0, inline_end_ = 0;  // in the received descriptor
  uint64_t bulk_unposted_ = 0, bulk_unread_ = 0;
  std::deque<Segment> segments_;  // posted, in order; the front one is being read
  size_t next_slot_ = 0;
};

}  // namespace ringbench::remote
