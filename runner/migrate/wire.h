// The migration stream from the rank's source (node A) to its target (node B), over one TCP
// connection on the cluster's link. The connection proves both ends know the job's secret
// (HMAC challenge-response, collectives/auth.h) before anything else crosses it, and the
// target checks every record against its own framebuffer before using it:
//   source -> target  Hello: magic, framebuffer bytes, chunk bytes, state signature, nonce
//   target -> source  its nonce, and its MAC over both nonces and the Hello
//   source -> target  its MAC
//   source -> target  records: chunk (index, bytes), state (the rank's cursor), done
//   target -> source  one byte: everything arrived and was stored
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace ringbench::migrate {

class Framebuffer;

// What both ends must agree on before a byte of state moves.
struct StreamShape {
  uint64_t framebuffer_bytes = 0;
  uint64_t chunk_bytes = 0;
  uint64_t signature = 0;  // of the state layout inside the framebuffer (model, batch, sizes)
};

using Millis = std::chrono::milliseconds;
constexpr int kStreamSocketBufferBytes = 8 << 20;  // a bulk stream: two chunks in flight

// Source: connects to the target and runs the handshake; returns the socket.
int connect_target(const std::string& host, int port, const std::string& secret, const StreamShape& shape,
                   Millis timeout);
void send_chunk(int fd, uint32_t index, const char* data, size_t len, Millis timeout);
void send_state(int fd, const std::string& state, Millis timeout);
void send_done(int fd, Millis timeout);
// Waits for the target's byte saying it stored everything.
void wait_stored(int fd, Millis timeout);

// The target's side of one connection's handshake, step by step, for a listener that runs many
// at once (source_gate.h). Each step throws Error, naming `who`, when the peer fails it.
class TargetHandshake {
 public:
  static constexpr size_t kHelloBytes = 64, kMacBytes = 32;
  explicit TargetHandshake(std::string who) : who_(std::move(who)) {}
  // The peer's hello (kHelloBytes): the reply to send it (this end's nonce and MAC).
  std::string answer_hello(const std::string& hello, const std::string& secret);
  // The peer's MAC (kMacBytes): returns only when it proves the job's secret.
  void check_mac(const std::string& mac, const std::string& secret) const;
  // After the MAC: the peer is this job's source; its framebuffer must be this target's.
  void check_shape(const StreamShape& expected) const;

 private:
  std::string who_, hello_, nonce_;
};

struct SourceRefusals;
// Target: accepts the source on `listen_fd` (until `deadline`, whatever else connects: see
// source_gate.h) and runs the handshake; connections that fail it are refused (counted in
// `refused`), nothing of them used.
int accept_source(int listen_fd, const std::string& secret, const StreamShape& expected,
                  std::chrono::steady_clock::time_point deadline, Millis timeout, SourceRefusals* refused = nullptr);
// Reads records into `fb` until done; returns the state record. Each record must arrive within
// `timeout` of the previous one.
std::string receive_stream(int fd, Framebuffer& fb, Millis timeout, uint64_t* bytes_received);
void send_stored(int fd, Millis timeout);

constexpr size_t kMaxStateBytes = size_t(64) << 20;

}  // namespace ringbench::migrate
