#include "runner/remote/wire.h"

#include <algorithm>
#include <cstring>

#include "models/zoo.h"

namespace ringbench::remote {

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

namespace {

constexpr Op kOps[] = {Op::hello,      Op::open_network, Op::close_network, Op::alloc,
                       Op::free_buffer, Op::write,       Op::read,          Op::set_input,
                       Op::forward,    Op::get_output,   Op::set_output_grad, Op::backward};

void put_header(char (&h)[kHeaderBytes], char first, uint32_t middle, uint64_t length) {
  std::string s(1, first);
  s.append(3, '\0');
  put_u32(s, middle);
  put_u64(s, length);
  std::memcpy(h, s.data(), kHeaderBytes);
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::hello: return "hello";
    case Op::open_network: return "open network";
    case Op::close_network: return "close network";
    case Op::alloc: return "alloc";
    case Op::free_buffer: return "free";
    case Op::write: return "write";
    case Op::read: return "read";
    case Op::set_input: return "set input";
    case Op::forward: return "forward";
    case Op::get_output: return "get output";
    case Op::set_output_grad: return "set output gradient";
    case Op::backward: return "backward";
  }
  return "?";
}

std::optional<RequestHeader> decode_request(const char (&h)[kHeaderBytes], std::string* why) {
  const auto* known = std::find(std::begin(kOps), std::end(kOps), static_cast<Op>(h[0]));
  if (known == std::end(kOps)) {
    *why = "unknown operation (byte " + std::to_string(static_cast<unsigned char>(h[0])) + ")";
    return std::nullopt;
  }
  if (!all_zero(h + 1, 3)) {
    *why = "a request header's padding is not zero";
    return std::nullopt;
  }
  RequestHeader r{*known, get_u32(h + 4), get_u64(h + 8)};
  if (r.length > kMaxPayload) {
    *why = std::string(op_name(r.op)) + ": a payload of " + std::to_string(r.length) + " bytes is over the " +
           std::to_string(kMaxPayload) + " any request may carry";
    return std::nullopt;
  }
  return r;
}

void encode_request(char (&h)[kHeaderBytes], const RequestHeader& r) {
  put_header(h, static_cast<char>(r.op), r.handle, r.length);
}

void encode_reply(char (&h)[kHeaderBytes], const ReplyHeader& r) {
  put_header(h, r.kind, 0, r.length);
}

std::optional<ReplyHeader> decode_reply(const char (&h)[kHeaderBytes], std::string* why) {
  if ((h[0] != 'O' && h[0] != 'E' && h[0] != 'P') || !all_zero(h + 1, 7)) {
    *why = "not a reply of the device protocol";
    return std::nullopt;
  }
  return ReplyHeader{h[0], get_u64(h + 8)};
}

// model[32] (NUL-padded) + u32 batch + i32 classes + i32 image size + u8 aux + u8 inference only
// + u8 precision + 1 zero byte.
std::string encode(const NetworkSpec& s) {
  std::string out(32, '\0');
  std::memcpy(out.data(), s.model.data(), std::min<size_t>(s.model.size(), 31));
  put_u32(out, s.batch);
  put_u32(out, static_cast<uint32_t>(s.classes));
  put_u32(out, static_cast<uint32_t>(s.image_size));
  out.push_back(static_cast<char>(s.aux_logits));
  out.push_back(static_cast<char>(s.inference_only));
  out.push_back(static_cast<char>(s.precision));
  out.push_back('\0');
  return out;
}

std::optional<NetworkSpec> decode_network_spec(const std::string& p, std::string* why) {
  auto fail = [&](const std::string& w) {
    *why = "open network: " + w;
    return std::nullopt;
  };
  if (p.size() != kNetworkSpecBytes) return fail("the request is " + std::to_string(p.size()) + " bytes, not 48");
  const size_t name_len = std::find(p.begin(), p.begin() + 32, '\0') - p.begin();
  if (name_len == 32 || !all_zero(p.data() + name_len, 32 - name_len)) return fail("the model's name is not a padded string");
  NetworkSpec s;
  s.model = p.substr(0, name_len);
  const auto names = models::model_names();
  if (std::find(names.begin(), names.end(), s.model) == names.end()) return fail("no such model in the zoo");
  s.batch = get_u32(p.data() + 32);
  s.classes = static_cast<int32_t>(get_u32(p.data() + 36));
  s.image_size = static_cast<int32_t>(get_u32(p.data() + 40));
  const auto flag = [&](size_t i) { return static_cast<unsigned char>(p[i]); };
  if (s.batch < 1 || s.batch > 65536) return fail("batch " + std::to_string(s.batch) + " is outside 1..65536");
  if (s.classes < 0 || s.classes > 100000) return fail("classes " + std::to_string(s.classes) + " is outside 0..100000");
  if (s.image_size < 0 || s.image_size > 1024)
    return fail("image size " + std::to_string(s.image_size) + " is outside 0..1024");
  if (flag(44) > 1 || flag(45) > 1 || flag(47) != 0) return fail("a flag is neither 0 nor 1");
  if (flag(46) > 3) return fail("precision " + std::to_string(flag(46)) + " is not known");
  s.aux_logits = flag(44) == 1;
  s.inference_only = flag(45) == 1;
  s.precision = flag(46);
  return s;
}

// u8 training + 7 zero bytes + u64 seed + u64 step + i64 sample offset.
std::string encode(const ForwardCall& f) {
  std::string out(1, static_cast<char>(f.training));
  out.append(7, '\0');
  put_u64(out, f.seed);
  put_u64(out, f.step);
  put_u64(out, static_cast<uint64_t>(f.sample_offset));
  return out;
}

std::optional<ForwardCall> decode_forward_call(const std::string& p, std::string* why) {
  if (p.size() != kForwardCallBytes || static_cast<unsigned char>(p[0]) > 1 || !all_zero(p.data() + 1, 7)) {
    *why = "forward: not a forward call (32 bytes, training 0 or 1, zero padding)";
    return std::nullopt;
  }
  ForwardCall f;
  f.training = p[0] == 1;
  f.seed = get_u64(p.data() + 8);
  f.step = get_u64(p.data() + 16);
  f.sample_offset = static_cast<int64_t>(get_u64(p.data() + 24));
  if (f.sample_offset < 0 || f.sample_offset > (int64_t{1} << 40)) {
    *why = "forward: sample offset out of range";
    return std::nullopt;
  }
  return f;
}

std::string encode(const GradChunk& c) {
  std::string out;
  put_u32(out, c.node);
  put_u32(out, 0);
  put_u64(out, c.offset);
  put_u64(out, c.count);
  return out;
}

GradChunk decode_grad_chunk(const char* p) { return {get_u32(p), get_u64(p + 8), get_u64(p + 16)}; }

}  // namespace ringbench::remote
