#include "models/checkpoint.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/errors.h"
#include "base/output_file.h"
#include "collectives/auth.h"

namespace ringbench::models {
namespace {

// The payload is the in-memory float array as is.
static_assert(std::endian::native == std::endian::little, "checkpoints are little-endian");

using json = nlohmann::json;
constexpr char kMagic[8] = {'R', 'B', 'C', 'K', 'P', 'T', '\r', '\n'};
constexpr size_t kDigestChars = 64;  // SHA-256 in hex
constexpr size_t kFixed = sizeof kMagic + 4 + 4;

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const std::string& in, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<unsigned char>(in[at + size_t(i)])) << (8 * i);
  return v;
}

std::string count_text(uint64_t n) {
  char b[32];
  if (n >= 1000000) std::snprintf(b, sizeof b, "%.1fM", double(n) / 1e6);
  else if (n >= 1000) std::snprintf(b, sizeof b, "%.1fK", double(n) / 1e3);
  else std::snprintf(b, sizeof b, "%llu", (unsigned long long)n);
  return b;
}

std::string what_it_is(const Checkpoint& c) {
  return c.model + " at " + std::to_string(c.image_size) + " px with " + std::to_string(c.classes) + " classes (" +
         count_text(c.param_count) + " parameters)";
}

// The header's fields, each checked for type and range; values stay empty.
Checkpoint parse_header(const std::string& text, const std::string& path) {
  const json h = json::parse(text, nullptr, false);
  const auto bad = [&](const std::string& why) { return Error("checkpoint " + path + ": bad header: " + why); };
  if (!h.is_object()) throw bad("not a JSON object");
  const auto field = [&](const char* k, json::value_t t) -> const json& {
    if (!h.contains(k)) throw bad(std::string("no '") + k + "'");
    const json& v = h[k];
    const bool ok = t == json::value_t::number_unsigned ? v.is_number_unsigned() : v.type() == t;
    if (!ok) throw bad(std::string("'") + k + "' is " + v.dump());
    return v;
  };
  Checkpoint c;
  c.model = field("model", json::value_t::string).get<std::string>();
  c.signature = field("signature", json::value_t::string).get<std::string>();
  c.param_count = field("param_count", json::value_t::number_unsigned).get<uint64_t>();
  c.state_count = field("state_count", json::value_t::number_unsigned).get<uint64_t>();
  const uint64_t size = field("image_size", json::value_t::number_unsigned).get<uint64_t>();
  const uint64_t classes = field("classes", json::value_t::number_unsigned).get<uint64_t>();
  if (size > 1 << 20 || classes > 1 << 24) throw bad("image_size " + std::to_string(size) + ", classes " + std::to_string(classes));
  c.image_size = int(size);
  c.classes = int(classes);
  return c;
}

// Copies `n` floats from `bytes` at `at` into `out` (the caller checked the bounds).
void take_floats(const std::string& bytes, size_t at, uint64_t n, std::vector<float>& out) {
  out.resize(size_t(n));
  if (n) std::memcpy(out.data(), bytes.data() + at, size_t(n) * sizeof(float));
}

}  // namespace

std::string graph_signature(const Graph& g) {
  std::string s;
  for (const ParamTensor& t : g.params) {
    s += t.name + ":";
    for (int d : t.shape) s += std::to_string(d) + ",";
    s += ";";
  }
  s += "state:" + std::to_string(g.state_count);
  return auth::sha256_hex(s);
}

Checkpoint Checkpoint::describe(const Graph& g) {
  Checkpoint c;
  c.model = g.model;
  c.image_size = g.input_dims().h;
  c.classes = g.output_node(0).out.c;
  c.param_count = g.param_count;
  c.state_count = g.state_count;
  c.signature = graph_signature(g);
  return c;
}

std::string Checkpoint::encode() const {
  if (params.size() != param_count || state.size() != state_count)
    throw Error("checkpoint of " + model + ": " + std::to_string(params.size()) + " parameters and " +
                std::to_string(state.size()) + " state values, but the graph has " + std::to_string(param_count) +
                " and " + std::to_string(state_count));
  const std::string header = json{{"model", model}, {"image_size", image_size}, {"classes", classes},
                                  {"param_count", param_count}, {"state_count", state_count},
                                  {"signature", signature}}.dump();
  std::string out(kMagic, sizeof kMagic);
  put_u32(out, kCheckpointVersion);
  put_u32(out, uint32_t(header.size()));
  out += header;
  out.append(reinterpret_cast<const char*>(params.data()), params.size() * sizeof(float));
  out.append(reinterpret_cast<const char*>(state.data()), state.size() * sizeof(float));
  out += auth::sha256_hex(out);
  return out;
}

void Checkpoint::save(const std::string& path) const { write_file_atomic(path, encode()); }

Checkpoint decode_checkpoint(const std::string& bytes, const std::string& path, const Graph& g) {
  const std::string name = "checkpoint " + path;
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw Error(name + " is not a ringbench checkpoint (no RBCKPT magic)");
  if (bytes.size() < kFixed + kDigestChars)
    throw Error(name + " is truncated: " + std::to_string(bytes.size()) + " bytes");
  if (const uint32_t v = get_u32(bytes, sizeof kMagic); v != kCheckpointVersion)
    throw Error(name + " is format version " + std::to_string(v) + "; this ringbench reads version " +
                std::to_string(kCheckpointVersion));
  const size_t body = bytes.size() - kDigestChars;
  if (auth::sha256_hex(bytes.substr(0, body)) != bytes.substr(body))
    throw Error(name + " is damaged: checksum mismatch (truncated or altered)");
  // The checksum only proves the file is as written; every size is still checked before use.
  const uint64_t header_len = get_u32(bytes, sizeof kMagic + 4);
  if (header_len > body - kFixed)
    throw Error(name + ": header of " + std::to_string(header_len) + " bytes, beyond the file's end");
  Checkpoint c = parse_header(bytes.substr(kFixed, size_t(header_len)), path);
  const uint64_t payload = body - kFixed - header_len;
  // Each count is bounded by the payload first, so the sum cannot overflow.
  if (c.param_count > payload / 4 || c.state_count > payload / 4 || (c.param_count + c.state_count) * 4 != payload)
    throw Error(name + ": header says " + std::to_string(c.param_count) + " parameters and " +
                std::to_string(c.state_count) + " state values, but the payload has " + std::to_string(payload) +
                " bytes");
  const Checkpoint want = Checkpoint::describe(g);
  if (c.model != want.model)
    throw Error(name + " holds " + c.model + " (" + count_text(c.param_count) + " parameters), not " + want.model);
  if (c.signature != want.signature || c.param_count != want.param_count || c.state_count != want.state_count)
    throw Error(name + " holds " + what_it_is(c) + ", not " + what_it_is(want) +
                ": use the --image-size (and classes) it was trained with");
  take_floats(bytes, kFixed + header_len, c.param_count, c.params);
  take_floats(bytes, kFixed + header_len + c.param_count * 4, c.state_count, c.state);
  return c;
}

Checkpoint load_checkpoint(const std::string& path, const Graph& g) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error("checkpoint " + path + (std::filesystem::exists(path, ec) ? " is not a regular file" : " does not exist"));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("checkpoint " + path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw Error("checkpoint " + path + ": read failed");
  return decode_checkpoint(ss.str(), path, g);
}

}  // namespace ringbench::models
