// TCP transport internals shared by its files: request, send item and socket state, the class.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/store.h"
#include "collectives/transport.h"
#include "collectives/transport/core/transport_core.h"
#include "collectives/transport/tcp/tcp_transport.h"
#include "collectives/transport/tcp/tcp_wire.h"

namespace ringbench::tcp_detail {

using transport_core::Clock;
using transport_core::fmt_s;
using transport_core::seconds;
using std::chrono::milliseconds;

using namespace tcp_wire;
constexpr size_t kMaxAbortText = 4096;
// Connections accepted but not yet through their handshake, at most, per listening rank.
constexpr size_t kMaxPendingHandshakes = 64;

struct Conn;  // declared first: an elaborated `struct Conn*` could name another file's Conn in a unity batch
struct ReqState : transport_core::ReqState {
  Conn* conn = nullptr;  // the socket it was posted on
};
using ReqPtr = std::shared_ptr<ReqState>;

struct SendItem {
  ReqPtr req;  // null for control frames
  FrameHeader hdr{};
  const char* payload = nullptr;
  size_t payload_len = 0;
  std::string text;  // owned payload of control frames
  size_t sent = 0;   // bytes of header + payload written so far
};

struct Conn {
  int fd = -1;
  int peer = -1;
  int index = 0;
  uint32_t events = 0;  // current epoll interest
  std::deque<SendItem> sendq;
  std::deque<ReqPtr> recvq;  // posted receives, matched in order
  // kDiscard: the rest of a payload whose receive failed, read and dropped.
  enum Rx { kHeader, kAwaitingRecv, kPayload, kAbortText, kDiscard } rx = kHeader;
  FrameHeader hdr{};
  size_t got = 0;  // bytes of the current header or payload
  ReqPtr cur;
  std::string text;
  bool heartbeat_queued = false;
  bool waiter = false;  // a thread in wait() reads this socket itself; the I/O thread keeps off
  bool peer_said_bye = false;
  bool closed = false;
  Clock::time_point last_rx;
};

class TcpTransport : public transport_core::TransportCore<ReqState> {
 public:
  TcpTransport(Store& store, int rank, int size, const TcpOptions& opts);
  ~TcpTransport() override;

  std::unique_ptr<Buffer> register_buffer(void* data, size_t bytes, MemKind kind) override;

 private:
  struct Peer {
    std::string addr;
    std::vector<std::unique_ptr<Conn>> conns;
    uint64_t sends = 0, recvs = 0;
  };

  void connect_mesh(Store& store);
  void accept_peers(int expected, Clock::time_point deadline);
  Conn* accept_hello(int fd, Hello& h, const std::string& nonce, Clock::time_point deadline);
  void reject(int fd, const std::string& why, bool reply, const std::string& client_nonce = "");
  void handshake(int fd, int peer, int socket_index, Clock::time_point deadline);
  HelloReply sign(HelloReply r, const std::string& client_nonce) const;
  std::string who(int peer) const override {
    return "rank " + std::to_string(peer) + " (" + peers_[peer].addr + ")";
  }

  // All below run with mu_ held. TransportCore's hooks first (tcp_transport.cc).
  void post(const ReqPtr& r) override;
  void advance(ReqState& r) override;
  void await(std::unique_lock<std::mutex>& lk, ReqState& r, Clock::time_point deadline) override;
  TimeoutError timed_out(const ReqState& r, milliseconds waited) const override;
  void publish_abort(const std::string& reason) override;
  void io_loop();
  void on_readable(Conn& c);
  void on_writable(Conn& c);
  void on_header(Conn& c);
  void on_closed(Conn& c, const std::string& why);
  void complete(const ReqPtr& r);
  void fail(std::exception_ptr e) override;
  void update_interest(Conn& c);
  void housekeeping(Clock::time_point now);
  // A transfer posted on this socket is not done. Per socket, not per peer: frames are
  // ordered only within a socket, so a peer's goodbye on one socket can overtake its last
  // data on another.
  static bool has_pending(const Conn& c);
  bool quiet() const;  // nothing left to send, every peer said bye or closed

  TcpOptions opts_;
  int unauthenticated_ = 0;  // connections closed because they did not prove the secret
  std::vector<Peer> peers_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int waiter_wake_fd_ = -1;
  milliseconds heartbeat_;
  Clock::time_point last_heartbeat_;

  bool closing_ = false;
  std::atomic<bool> stop_{false};
  std::vector<char> discard_ = std::vector<char>(size_t{64} << 10);  // for Conn::kDiscard
  std::thread io_;
};

}  // namespace ringbench::tcp_detail
