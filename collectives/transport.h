// The transport contract every collective is written against (in the spirit of Gloo's
// device/pair/buffer layers and NCCL's net plugin API):
//   - a Transport connects this rank to its peers (setup, outside any timed loop);
//   - memory is registered once as a Buffer; transfers name (buffer, offset, length);
//   - isend/irecv are non-blocking and return a Request to test() or wait() on with a timeout;
//   - messages between two ranks are matched in the order they were posted, and each carries
//     a 64-bit tag that the receiver checks: a length or tag mismatch is an IoError on the
//     receiver, never silent garbage;
//   - a failed peer (closed, killed, silent for longer than the timeout) or a peer's abort()
//     fails every pending and later request with an IoError naming that peer;
//   - optionally (caps().recv_sink), a receive can hand its payload to a sink where the
//     transport holds it, instead of copying it into a buffer: NCCL's primitives reduce
//     straight out of the peer's FIFO the same way;
//   - optionally (caps().forward), a receive can be sent on to another peer as it arrives,
//     transformed piece by piece (reduced or copied) straight into that peer's memory: NCCL's
//     recvReduceSend and recvCopySend.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace ringbench {

enum class MemKind { host, cuda };

struct TransportCaps {
  std::string name;          // "tcp", "verbs"
  bool host_memory = true;   // can send from / receive into host pointers
  bool cuda_memory = false;  // can send from / receive into CUDA device pointers
  double link_gbps = 0;      // nominal link speed per peer in Gbit/s, 0 when unknown
  bool recv_sink = false;    // offers irecv_sink()
  bool forward = false;      // offers irecv_forward()
  // With forward: the message size that goes straight through best (a fraction of the
  // transport's buffering to the next rank, so that a forward finds room while it arrives).
  size_t forward_bytes = 0;
};

// Takes a received payload in order, piece by piece (bytes, count); pieces may split an element.
using RecvSink = std::function<void(const char* bytes, size_t n)>;

// Turns received bytes [offset, offset + n) of a message (at `in`) into the bytes to send on:
// writes them to `next` (where the transport sends from, straight in the receiver's memory) when
// that is not null, and to the forward's home buffer when `next` is null or the caller wants them
// there too. Pieces are whole elements of any type up to 8 bytes, and come in order.
using ForwardFn = std::function<void(const char* in, size_t offset, size_t n, char* next)>;

// A registered memory region. Owned by the caller; must outlive its requests.
class Buffer {
 public:
  Buffer(void* data, size_t bytes, MemKind kind) : data_(data), bytes_(bytes), kind_(kind) {}
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  MemKind kind() const { return kind_; }

 private:
  void* data_;
  size_t bytes_;
  MemKind kind_;
};

class Request {
 public:
  // Destroying a request that has not completed fails the transport (its buffer may be about
  // to be freed): requests are waited for, or the transport is abandoned. Requests must be
  // destroyed before their transport.
  virtual ~Request() = default;
  // True once complete; throws the transport's IoError if the request failed.
  virtual bool test() = 0;
  // Blocks until complete; throws TimeoutError (naming the peer) after `timeout`.
  virtual void wait(std::chrono::milliseconds timeout) = 0;
};

// The two halves of a forward (Transport::irecv_forward).
struct Forward {
  std::unique_ptr<Request> recv, send;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const TransportCaps& caps() const = 0;
  // The path actually used, as key/value pairs for `#` metadata and JSON
  // (e.g. transport=tcp, addr=10.0.0.1:41234, iface=eth0, sockets_per_peer=2).
  virtual std::map<std::string, std::string> path_info() const = 0;

  virtual std::unique_ptr<Buffer> register_buffer(void* data, size_t bytes,
                                                  MemKind kind = MemKind::host) = 0;
  virtual std::unique_ptr<Request> isend(int peer, const Buffer& buf, size_t offset,
                                         size_t length, uint64_t tag) = 0;
  virtual std::unique_ptr<Request> irecv(int peer, Buffer& buf, size_t offset, size_t length,
                                         uint64_t tag) = 0;
  // Where caps().recv_sink: a receive of `length` bytes whose payload goes to `sink` (called on
  // whichever thread moves the transport along, with the transport's lock held) straight from
  // where the transport holds it, one copy fewer than irecv() and a reduction of the buffer.
  // The message is matched and checked (length, tag) before the sink sees a byte. A sink that
  // throws fails the transport. Elsewhere it throws Error.
  virtual std::unique_ptr<Request> irecv_sink(int peer, size_t length, uint64_t tag, RecvSink sink) = 0;
  // Where caps().forward: receives `length` bytes from `from` and sends them on to `to`, under the
  // same tag, transformed by `fn` (see ForwardFn) as they arrive. The send is queued behind this
  // rank's earlier sends to `to`, as if posted now. Where the transport cannot hand fn a place in
  // `to`'s memory at once (it is full), fn writes the piece to `home` (buf at offset, length bytes)
  // and the transport sends it from there later, so that a full peer never holds up the receive.
  // Two requests: the receive completes once all arrived and went through fn (home then holds
  // what fn put there), the send once all went on; home must stay as it is until then.
  // Elsewhere it throws Error.
  virtual Forward irecv_forward(int from, int to, size_t length, uint64_t tag, Buffer& home, size_t offset,
                                ForwardFn fn) = 0;
  // Fails this transport and tells every peer why, so that all ranks stop with the same cause
  // instead of waiting for a timeout. Safe to call more than once, never throws.
  virtual void abort(const std::string& reason) noexcept = 0;
};

}  // namespace ringbench
