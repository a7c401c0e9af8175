// The device server's wire protocol (runner/remote/): what a client of a remote device and the
// server (`ringbench device-server`) exchange over TCP. All integers little-endian, fixed width.
//
//   connection start (challenge-response on the job's secret, collectives/auth.h, as the store's):
//       server -> client: "RBDEVSV1" + a 32-byte nonce Ns
//       client -> server: "RBDEVSV1" + a 32-byte nonce Nc + HMAC(secret, "device client", Ns, Nc)
//       server -> client: HMAC(secret, "device server", Nc, Ns)
//     A connection whose magic or MAC is wrong, or that is not done within 5 s, is closed unread.
//   request:  header (16 bytes): op (1) + 3 zero bytes + u32 handle + u64 payload length; payload
//   reply:    header (16 bytes): kind (1: 'O' ok, 'E' error, 'P' gradients) + 7 zero bytes
//             + u64 payload length; payload
// The operations are a fixed set on objects the server made for this connection (`handle`
// names one in its own table; another connection's handles do not exist for it); no code and
// no command line comes from the wire. The first request must be hello. Any error is answered
// with 'E' and a message, and the server then closes the connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ringbench::remote {

constexpr char kMagic[8] = {'R', 'B', 'D', 'E', 'V', 'S', 'V', '1'};
constexpr size_t kHeaderBytes = 16;
constexpr char kClientPurpose[] = "device client";
constexpr char kServerPurpose[] = "device server";

// The operations. handle: the network ('I' ... 'b', 'X') or buffer ('W', 'R', 'F') it acts on.
enum class Op : char {
  hello = 'H',           // payload: f64 fraction of the device's memory -> 'O': the device, as JSON text
  open_network = 'N',    // payload: NetworkSpec -> 'O': u32 network, u32 params, u32 grads, u32 state buffers
  close_network = 'X',   // -> 'O'
  alloc = 'A',           // payload: u64 bytes -> 'O': u32 buffer
  free_buffer = 'F',     // -> 'O'
  write = 'W',           // payload: u64 offset + bytes -> 'O'
  read = 'R',            // payload: u64 offset + u64 length -> 'O': the bytes
  set_input = 'I',       // payload: the batch, floats -> 'O'
  forward = 'f',         // payload: ForwardCall -> 'O'
  get_output = 'o',      // payload: u32 output index -> 'O': floats
  set_output_grad = 'g', // payload: u32 output index + 4 zero bytes + floats -> 'O'
  backward = 'b',        // -> one 'P' per node with parameters, as backward finishes it, then 'O'
};
const char* op_name(Op op);
// Whether the n bytes at p are all zero: the padding every decoder checks.
inline bool all_zero(const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

struct RequestHeader {
  Op op = Op::hello;
  uint32_t handle = 0;
  uint64_t length = 0;
};
// The header's checks that need no state: a known op, zero padding, a payload no longer than
// kMaxPayload. Returns the header, or nothing with *why set.
constexpr uint64_t kMaxPayload = uint64_t{1} << 32;  // 4 GiB: the most any one op may carry
std::optional<RequestHeader> decode_request(const char (&h)[kHeaderBytes], std::string* why);
void encode_request(char (&h)[kHeaderBytes], const RequestHeader& r);

struct ReplyHeader {
  char kind = 'O';
  uint64_t length = 0;
};
void encode_reply(char (&h)[kHeaderBytes], const ReplyHeader& r);
std::optional<ReplyHeader> decode_reply(const char (&h)[kHeaderBytes], std::string* why);

// open_network's payload: a model of the zoo and how to build it.
struct NetworkSpec {
  std::string model;  // a name of models::model_names(), at most 31 characters
  uint32_t batch = 1;
  int32_t classes = 0, image_size = 0;
  bool aux_logits = false, inference_only = false;
  uint8_t precision = 0;  // models::Precision
};
constexpr size_t kNetworkSpecBytes = 48;
std::string encode(const NetworkSpec& s);
// Checks field by field (known model, batch 1..65536, classes 0..100000, image size 0..1024,
// flags 0 or 1, a known precision); nothing with *why naming the field otherwise.
std::optional<NetworkSpec> decode_network_spec(const std::string& payload, std::string* why);

// forward's payload (models::ForwardArgs).
struct ForwardCall {
  bool training = false;
  uint64_t seed = 0, step = 0;
  int64_t sample_offset = 0;
};
constexpr size_t kForwardCallBytes = 32;
std::string encode(const ForwardCall& f);
std::optional<ForwardCall> decode_forward_call(const std::string& payload, std::string* why);

// A 'P' reply's payload starts with this: the node, and the range of the gradient buffer (in
// floats) its gradients occupy; the floats follow.
struct GradChunk {
  uint32_t node = 0;
  uint64_t offset = 0, count = 0;
};
constexpr size_t kGradChunkBytes = 24;
std::string encode(const GradChunk& c);
GradChunk decode_grad_chunk(const char* p);

void put_u32(std::string& out, uint32_t v);
void put_u64(std::string& out, uint64_t v);
uint32_t get_u32(const char* p);
uint64_t get_u64(const char* p);

}  // namespace ringbench::remote
