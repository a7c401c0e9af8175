// The TCP store's wire protocol, shared by its server (store_server.cc) and client
// (store_client.cc). Internal to the collectives library.
//
// Wire protocol (all integers little-endian, fixed width):
//   connection start (challenge-response on the job's secret, collectives/auth.h):
//       server -> client: the 8-byte magic "RBSTORE2" + a 32-byte nonce Ns
//       client -> server: "RBSTORE2" + a 32-byte nonce Nc + HMAC(secret, "store client", Ns, Nc)
//       server -> client: HMAC(secret, "store server", Nc, Ns)
//     The server closes a connection whose magic or MAC is wrong, or that has not completed the
//     exchange within 10 s, without acting on anything it sent, and counts it (rejected()).
//     The client checks the server's MAC, so it never talks to a store that lacks the secret.
//   request:  op (1 byte: 'S' set, 'G' get, 'A' add) + u32 key length + key
//             + u64 value length + value
//             'S': value = the bytes to store
//             'G': value = u64 timeout in milliseconds
//             'A': value = i64 delta
//   response: status (1 byte: 'O' ok, 'T' timed out, 'E' error) + u64 length + payload
//             'O' payload: 'S' nothing, 'G' the value, 'A' the new counter as i64
//             'E' payload: an error message
// The server answers requests of one connection in order; a client sends one request at a
// time. Blocking GETs are parked in the server and answered when the key appears, or with
// 'T' when their timeout passes, so the server never blocks on a client.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "collectives/auth.h"

namespace ringbench::store_wire {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

constexpr char kStoreMagic[8] = {'R', 'B', 'S', 'T', 'O', 'R', 'E', '2'};
constexpr size_t kChallenge = sizeof kStoreMagic + auth::kNonceBytes;                   // server's
constexpr size_t kClientHello = sizeof kStoreMagic + auth::kNonceBytes + auth::kMacBytes;  // client's
constexpr size_t kMaxKey = 4096;
constexpr uint64_t kMaxValue = uint64_t{64} << 20;
constexpr size_t kRequestHeader = 1 + 4;   // op + key length
constexpr size_t kResponseHeader = 1 + 8;  // status + payload length
constexpr char kOk = 'O';
constexpr char kTimedOut = 'T';
constexpr char kFailed = 'E';

inline void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

inline void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

inline uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

inline uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

inline std::string encode_u64(uint64_t v) {
  std::string s;
  put_u64(s, v);
  return s;
}

}  // namespace ringbench::store_wire
