#include "runner/remote/channel_wire.h"

#include <algorithm>
#include <cstring>

#include "runner/remote/wire.h"

namespace ringbench::remote {
namespace {

constexpr char kChoiceMagic[4] = {'R', 'B', 'D', 'T'};
constexpr char kStreamMagic[4] = {'R', 'B', 'D', 'S'};

uint16_t get_u16(const char* p) {
  return uint16_t(uint16_t{static_cast<unsigned char>(p[0])} | uint16_t{static_cast<unsigned char>(p[1])} << 8);
}

}  // namespace

const char* transport_name(LinkTransport t) { return t == LinkTransport::verbs ? "verbs" : "tcp"; }

std::optional<LinkTransport> parse_transport(const std::string& name) {
  if (name == "tcp") return LinkTransport::tcp;
  if (name == "verbs") return LinkTransport::verbs;
  return std::nullopt;
}

std::string encode_link_choice(LinkTransport t) {
  std::string s(kChoiceMagic, 4);
  s.push_back(static_cast<char>(t));
  s.append(3, '\0');
  return s;
}

std::optional<LinkTransport> decode_link_choice(const char (&b)[kLinkChoiceBytes], std::string* why) {
  if (std::memcmp(b, kChoiceMagic, 4) != 0) {
    *why = "no transport choice after the handshake (an older client?)";
    return std::nullopt;
  }
  const auto t = static_cast<unsigned char>(b[4]);
  if (t > 1 || !all_zero(b + 5, 3)) {
    *why = "an unknown transport (byte " + std::to_string(t) + ") or padding that is not zero";
    return std::nullopt;
  }
  return static_cast<LinkTransport>(t);
}

std::string encode(const BootFrame& f) {
  std::string s(1, f.op);
  s.push_back('\0');
  s.push_back(static_cast<char>(f.key.size() & 0xff));
  s.push_back(static_cast<char>((f.key.size() >> 8) & 0xff));
  put_u32(s, static_cast<uint32_t>(f.value.size()));
  return s + f.key + f.value;
}

bool valid_boot_key(const std::string& key) {
  return !key.empty() && key.size() <= kMaxBootKey && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '/' || c == '_' || c == '.' || c == '-';
  });
}

std::optional<BootSizes> decode_boot_header(const char (&h)[kBootHeaderBytes], std::string* why) {
  BootSizes s{h[0], get_u16(h + 2), get_u32(h + 4)};
  if (s.op != 'S' && s.op != 'A' && s.op != 'R') {
    *why = "a bootstrap frame of unknown kind (byte " + std::to_string(static_cast<unsigned char>(s.op)) + ")";
    return std::nullopt;
  }
  if (h[1] != 0) {
    *why = "a bootstrap frame's padding is not zero";
    return std::nullopt;
  }
  if (s.key < 1 || s.key > kMaxBootKey) {
    *why = "a bootstrap key of " + std::to_string(s.key) + " bytes (1.." + std::to_string(kMaxBootKey) + ")";
    return std::nullopt;
  }
  if (s.value > kMaxBootValue || (s.op != 'S' && s.value != 8)) {
    *why = "a bootstrap value of " + std::to_string(s.value) + " bytes (at most " + std::to_string(kMaxBootValue) +
           "; 8 for a count)";
    return std::nullopt;
  }
  return s;
}

void encode(char* out, const StreamHeader& h) {
  std::string s(kStreamMagic, 4);
  s.push_back(h.kind);
  s.append(3, '\0');
  put_u32(s, h.inline_bytes);
  put_u32(s, 0);
  put_u64(s, h.bulk);
  put_u64(s, h.seq);
  std::memcpy(out, s.data(), kStreamHeaderBytes);
}

std::optional<StreamHeader> decode_stream_header(const char* p, uint64_t expected_seq, std::string* why) {
  StreamHeader h{p[4], get_u32(p + 8), get_u64(p + 16), get_u64(p + 24)};
  if (std::memcmp(p, kStreamMagic, 4) != 0 || (h.kind != 'D' && h.kind != 'B') || !all_zero(p + 5, 3) ||
      get_u32(p + 12) != 0) {
    *why = "a stream descriptor with a wrong magic, kind or padding";
    return std::nullopt;
  }
  if (h.seq != expected_seq) {
    *why = "stream descriptor " + std::to_string(h.seq) + " where " + std::to_string(expected_seq) + " was due";
    return std::nullopt;
  }
  if (h.inline_bytes > kInlineBytes || h.bulk > kMaxBulk) {
    *why = "a stream descriptor announcing " + std::to_string(h.inline_bytes) + " inline bytes (at most " +
           std::to_string(kInlineBytes) + ") and " + std::to_string(h.bulk) + " after it";
    return std::nullopt;
  }
  const bool empty = h.inline_bytes == 0 && h.bulk == 0;
  if (empty != (h.kind == 'B')) {
    *why = h.kind == 'B' ? "a goodbye that carries data" : "an empty stream descriptor";
    return std::nullopt;
  }
  return h;
}

}  // namespace ringbench::remote
