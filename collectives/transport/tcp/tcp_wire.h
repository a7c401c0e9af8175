// The TCP transport's wire format: the handshake messages and the frame header, shared by the
// transport and by its fuzz target (fuzz/tcp_transport_fuzz.cc), which speaks it as a peer.
// Internal to the collectives library. Both ends are the same build: fields are in host order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "collectives/auth.h"

namespace ringbench::tcp_wire {

inline constexpr char kTcpMagic[8] = {'R', 'I', 'N', 'G', 'B', 'N', 'C', 'H'};
inline constexpr uint32_t kProtocolVersion = 2;  // 2: challenge-response on the job's secret

// The handshake (collectives/auth.h): the accepting rank sends a Challenge; the connecting rank
// answers with a Hello whose mac is HMAC(secret, "tcp client", challenge nonce, the Hello up to
// its mac); the accepting rank checks it (a wrong one is closed unanswered and counted) and
// answers with a HelloReply whose mac is HMAC(secret, "tcp server", the Hello's nonce, the
// reply up to its mac), which the connecting rank checks.
struct Challenge {
  char magic[8];
  char nonce[auth::kNonceBytes];
};
struct Hello {
  char magic[8];
  uint32_t version, from_rank, to_rank, world_size, socket_index, sockets_per_peer;
  char job_id[64];
  char nonce[auth::kNonceBytes];
  char mac[auth::kMacBytes];
};
struct HelloReply {
  char magic[8];
  uint32_t status;  // 0 = accepted
  char message[252];
  char mac[auth::kMacBytes];
};

template <class T>
std::string signed_part(const T& m) {  // the bytes of a handshake message up to its mac
  return std::string(reinterpret_cast<const char*>(&m), offsetof(T, mac));
}

enum FrameType : uint32_t { kData = 1, kHeartbeat = 2, kAbort = 3, kBye = 4 };
struct FrameHeader {
  uint32_t type;
  uint32_t reserved;
  uint64_t tag;
  uint64_t length;
};

}  // namespace ringbench::tcp_wire
