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

namespace ringbench::migrate {

class Framebuffer;

// What both ends must agree on before a byte of state moves.
struct StreamShape {
  uint64_t framebuffer_bytes = 0;
  uint64_t chunk_bytes = 0;
  uint64_t signature = 0;  // of the state layout inside the framebuffer (model, batch, sizes)
};

using Millis = std::chrono::milliseconds;

// Source: connects to the target and runs the handshake; returns the socket.
int connect_target(const std::string& host, int port, const std::string& secret, const StreamShape& shape,
                   Millis timeout);
void send_chunk(int fd, uint32_t index, const char* data, size_t len, Millis timeout);
void send_state(int fd, const std::string& state, Millis timeout);
void send_done(int fd, Millis timeout);
// Waits for the target's byte saying it stored everything.
void wait_stored(int fd, Millis timeout);

// Target: accepts the source on `listen_fd` (until `deadline`) and runs the handshake; a peer
// that fails it is an Error (nothing of it is used).
int accept_source(int listen_fd, const std::string& secret, const StreamShape& expected,
                  std::chrono::steady_clock::time_point deadline, Millis timeout);
// Reads records into `fb` until done; returns the state record. Each record must arrive within
// `timeout` of the previous one.
std::string receive_stream(int fd, Framebuffer& fb, Millis timeout, uint64_t* bytes_received);
void send_stored(int fd, Millis timeout);

constexpr size_t kMaxStateBytes = size_t(64) << 20;

}  // namespace ringbench::migrate
