// What the device protocol exchanges besides its requests and replies (wire.h) when the link is
// not plain TCP: the transport a client asks for, the verbs bootstrap over the authenticated TCP
// connection, and the frames that carry the request stream over a message transport. Free of
// ibverbs, so that it is built, tested and fuzzed everywhere. All integers little-endian.
//
//   after the HMAC handshake, on the TCP connection:
//     client -> server: LinkChoice (8 bytes): "RBDT" + transport (0 tcp, 1 verbs) + 3 zero bytes
//     server -> client: a reply header (wire.h): 'O' with no payload, or 'E' + why, then it closes
//   verbs only, then: the bootstrap (BootFrame), the QP exchange of collectives' verbs transport
//     (its ConnInfo, checked by verbs_wire::decode) and a barrier, over the same TCP connection;
//     the server keeps the barrier's count. The TCP connection then stays open, unused: its end
//     tells either side at once that the other process is gone.
//   the stream over the transport's messages (transport_channel.h):
//     a descriptor (kDescriptorBytes, always that long): StreamHeader + up to kInlineBytes of the
//     stream, then `bulk` bytes of the stream in messages of min(kSegmentBytes, left) each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace ringbench::remote {

enum class LinkTransport : uint8_t { tcp = 0, verbs = 1 };
const char* transport_name(LinkTransport t);
// "tcp" or "verbs"; nothing otherwise.
std::optional<LinkTransport> parse_transport(const std::string& name);

constexpr size_t kLinkChoiceBytes = 8;
std::string encode_link_choice(LinkTransport t);
// Magic, a known transport, zero padding; nothing with *why set otherwise.
std::optional<LinkTransport> decode_link_choice(const char (&b)[kLinkChoiceBytes], std::string* why);

// One operation of the bootstrap's store (collectives/store.h) between the two ends: the client
// sets and adds, the server sets and answers adds ('R': the counter's new value).
struct BootFrame {
  char op = 'S';  // 'S' set, 'A' add (value: i64 delta), 'R' the result of an add (value: i64)
  std::string key, value;
};
constexpr size_t kBootHeaderBytes = 8;  // op (1) + 1 zero byte + u16 key length + u32 value length
constexpr size_t kMaxBootKey = 64;      // "verbs/conn/1", "verbs/ready/arrived"
constexpr size_t kMaxBootValue = 4096;  // a ConnInfo of two ranks is 124 bytes
constexpr int kMaxBootFrames = 16;      // the bootstrap needs 4 from either side
std::string encode(const BootFrame& f);
// The header's checks: a known op, zero padding, a key of 1..kMaxBootKey bytes, a value within
// kMaxBootValue (exactly 8 for 'A' and 'R'). Returns the key and value lengths.
struct BootSizes {
  char op = 'S';
  size_t key = 0, value = 0;
};
std::optional<BootSizes> decode_boot_header(const char (&h)[kBootHeaderBytes], std::string* why);
// A key's characters: [a-z0-9/_.-] only.
bool valid_boot_key(const std::string& key);

// The stream over messages: every descriptor is kDescriptorBytes long (the receiver has posted
// exactly that), carries its sequence number, up to kInlineBytes of the stream, and the number
// of stream bytes that follow it in segments of kSegmentBytes (the last one shorter).
constexpr size_t kDescriptorBytes = 1024;
constexpr size_t kStreamHeaderBytes = 32;
constexpr size_t kInlineBytes = kDescriptorBytes - kStreamHeaderBytes;
constexpr size_t kSegmentBytes = size_t{256} << 10;
constexpr uint64_t kMaxBulk = uint64_t{1} << 40;
struct StreamHeader {
  char kind = 'D';  // 'D' data, 'B' goodbye: the sender closes the stream here (nothing inline or after)
  uint32_t inline_bytes = 0;
  uint64_t bulk = 0;
  uint64_t seq = 0;
};
void encode(char* out, const StreamHeader& h);  // kStreamHeaderBytes at out
// Magic, a known kind, zero padding, inline within kInlineBytes, bulk within kMaxBulk, not empty
// (data) or empty (goodbye), the sequence number expected; nothing with *why set otherwise.
std::optional<StreamHeader> decode_stream_header(const char* p, uint64_t expected_seq, std::string* why);

}  // namespace ringbench::remote
