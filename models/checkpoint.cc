#include "models/checkpoint.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/errors.h"
#include "base/input_file.h"
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
constexpr size_t kReadChunk = size_t(1) << 20;  // the payload is read and hashed this much at a time
constexpr const char* kHeaderKeys[] = {"classes", "image_size", "model", "param_count", "signature", "state_count"};

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<unsigned char>(in[i])) << (8 * i);
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

// Where what_it_is() says the same of both: every count in full and the tensors' signature.
std::string what_it_is_exactly(const Checkpoint& c) {
  return c.model + " at " + std::to_string(c.image_size) + " px with " + std::to_string(c.classes) + " classes (" +
         std::to_string(c.param_count) + " parameters, " + std::to_string(c.state_count) +
         " state values, tensors of signature " + c.signature.substr(0, 16) + ")";
}

// The header's fields, each checked for type and range, and no other key; values stay empty.
Checkpoint parse_header(std::string_view text, const std::string& path) {
  const json h = json::parse(text, nullptr, false);
  const auto bad = [&](const std::string& why) { return Error("checkpoint " + path + ": bad header: " + why); };
  if (!h.is_object()) throw bad("not a JSON object");
  for (const auto& item : h.items())
    if (std::find(std::begin(kHeaderKeys), std::end(kHeaderKeys), item.key()) == std::end(kHeaderKeys))
      throw bad("unknown key " + quote_excerpt(item.key()));
  const auto field = [&](const char* k, json::value_t t) -> const json& {
    if (!h.contains(k)) throw bad(std::string("no '") + k + "'");
    const json& v = h[k];
    const bool ok = t == json::value_t::number_unsigned ? v.is_number_unsigned() : v.type() == t;
    if (!ok)
      throw bad(std::string("'") + k + "' is " + quote_excerpt(v.dump(-1, ' ', false, json::error_handler_t::replace)));
    return v;
  };
  Checkpoint c;
  c.model = field("model", json::value_t::string).get<std::string>();
  c.signature = field("signature", json::value_t::string).get<std::string>();
  // Both are echoed in errors: plain names and hex only.
  const auto plain = [](const std::string& s, size_t max, const char* chars) {
    return !s.empty() && s.size() <= max && s.find_first_not_of(chars) == std::string::npos;
  };
  if (!plain(c.model, 64, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-."))
    throw bad("'model' is " + quote_excerpt(c.model) + ", not a model's name");
  if (c.signature.size() != 64 || !plain(c.signature, 64, "0123456789abcdef"))
    throw bad("'signature' is " + quote_excerpt(c.signature) + ", not 64 hex digits");
  c.param_count = field("param_count", json::value_t::number_unsigned).get<uint64_t>();
  c.state_count = field("state_count", json::value_t::number_unsigned).get<uint64_t>();
  const uint64_t size = field("image_size", json::value_t::number_unsigned).get<uint64_t>();
  const uint64_t classes = field("classes", json::value_t::number_unsigned).get<uint64_t>();
  if (size > 1 << 20 || classes > 1 << 24) throw bad("image_size " + std::to_string(size) + ", classes " + std::to_string(classes));
  c.image_size = int(size);
  c.classes = int(classes);
  return c;
}

// Incremental SHA-256 (OpenSSL EVP): the payload is hashed as it is read, never held twice.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) throw Error("SHA-256 failed (OpenSSL)");
  }
  void update(const void* data, size_t n) {
    if (n && EVP_DigestUpdate(ctx_.get(), data, n) != 1) throw Error("SHA-256 failed (OpenSSL)");
  }
  // The hex digest of what was hashed so far; the hash goes on (a copy is finished).
  std::string hex() const {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> copy(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!copy || EVP_MD_CTX_copy_ex(copy.get(), ctx_.get()) != 1 || EVP_DigestFinal_ex(copy.get(), out, &len) != 1)
      throw Error("SHA-256 failed (OpenSSL)");
    return auth::to_hex(std::string(reinterpret_cast<const char*>(out), len));
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

// A checkpoint's bytes, read in order: a file, or a string in memory. size() is known up front
// (a file's from fstat), so every size in the header is checked against it before reading on.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // The next `n` bytes into `out`; throws Error when they are not there.
  virtual void read(char* out, size_t n) = 0;
};

class StringSource : public ByteSource {
 public:
  explicit StringSource(std::string_view bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  void read(char* out, size_t n) override {
    if (n > bytes_.size() - at_) throw Error("read past the end");  // size() was checked: never happens
    std::memcpy(out, bytes_.data() + at_, n);
    at_ += n;
  }

 private:
  std::string_view bytes_;
  size_t at_ = 0;
};

class FileSource : public ByteSource {
 public:
  // Refuses what is not a regular file before opening it (opening a device can act), and again
  // on the descriptor (it may have been replaced in between; O_NONBLOCK: a FIFO does not hang).
  explicit FileSource(const std::string& path) : name_("checkpoint " + path) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0)
      throw Error(name_ + (errno == ENOENT ? " does not exist" : ": cannot open: " + std::string(std::strerror(errno))));
    refuse_unless_regular(st);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) throw Error(name_ + ": cannot open: " + std::strerror(errno));
    const bool stat_ok = ::fstat(fd, &st) == 0;
    const int stat_errno = errno;
    if (!stat_ok || !S_ISREG(st.st_mode)) ::close(fd);
    if (!stat_ok) throw Error(name_ + ": cannot open: " + std::strerror(stat_errno));
    refuse_unless_regular(st);
    fd_ = fd;
    size_ = uint64_t(st.st_size);
  }
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  uint64_t size() const override { return size_; }
  void read(char* out, size_t n) override {
    while (n > 0) {
      const ssize_t got = ::read(fd_, out, n);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw Error(name_ + ": read failed: " + std::strerror(errno));
      if (got == 0) throw Error(name_ + " is truncated: it shrank to " + std::to_string(at_) + " bytes while being read");
      out += got;
      n -= size_t(got);
      at_ += uint64_t(got);
    }
  }

 private:
  void refuse_unless_regular(const struct stat& st) const {
    if (!S_ISREG(st.st_mode)) throw Error(name_ + " is " + file_type_name(st.st_mode) + ", not a regular file");
  }

  std::string name_;
  int fd_ = -1;
  uint64_t size_ = 0, at_ = 0;
};

// `n` floats from `in` into `out`, hashed as they arrive; allocated only now that the sizes are
// known to be the graph's.
void read_floats(ByteSource& in, uint64_t n, std::vector<float>& out, Sha256& hash) {
  out.resize(size_t(n));
  char* at = reinterpret_cast<char*>(out.data());
  for (size_t left = size_t(n) * sizeof(float); left > 0;) {
    const size_t step = std::min(left, kReadChunk);
    in.read(at, step);
    hash.update(at, step);
    at += step;
    left -= step;
  }
}

// The magic, version and header of `in`, checked against its size; `prefix` gets their bytes
// (the checksum covers them). Nothing past the header is read.
Checkpoint read_header(ByteSource& in, const std::string& path, std::string& prefix) {
  const std::string name = "checkpoint " + path;
  const uint64_t size = in.size();
  prefix.assign(kFixed, '\0');
  in.read(prefix.data(), size_t(std::min<uint64_t>(size, kFixed)));
  if (size < sizeof kMagic || std::memcmp(prefix.data(), kMagic, sizeof kMagic) != 0)
    throw Error(name + " is not a ringbench checkpoint (no RBCKPT magic)");
  if (size < kFixed + kDigestChars) throw Error(name + " is truncated: " + std::to_string(size) + " bytes");
  if (const uint32_t v = get_u32(prefix.data() + sizeof kMagic); v != kCheckpointVersion)
    throw Error(name + " is format version " + std::to_string(v) + "; this ringbench reads version " +
                std::to_string(kCheckpointVersion));
  const uint64_t body = size - kDigestChars;
  const uint64_t header_len = get_u32(prefix.data() + sizeof kMagic + 4);
  if (header_len > body - kFixed)
    throw Error(name + ": header of " + std::to_string(header_len) + " bytes, beyond the file's end");
  if (header_len > kMaxCheckpointHeader)
    throw Error(name + ": header of " + std::to_string(header_len) + " bytes; a version-1 header is at most " +
                std::to_string(kMaxCheckpointHeader));
  prefix.resize(kFixed + size_t(header_len));
  in.read(prefix.data() + kFixed, size_t(header_len));
  Checkpoint c = parse_header(std::string_view(prefix).substr(kFixed), path);
  const uint64_t payload = body - kFixed - header_len;
  // Each count is bounded by the payload first, so the sum cannot overflow.
  if (c.param_count > payload / 4 || c.state_count > payload / 4 || (c.param_count + c.state_count) * 4 != payload)
    throw Error(name + ": header says " + std::to_string(c.param_count) + " parameters and " +
                std::to_string(c.state_count) + " state values, but the payload has " + std::to_string(payload) +
                " bytes");
  return c;
}

// Throws unless `c` holds values for `g`, naming what it holds and what `g` is, distinctly.
void check_holds(const Checkpoint& c, const Graph& g, const std::string& path) {
  const std::string name = "checkpoint " + path;
  const Checkpoint want = Checkpoint::describe(g);
  if (c.model != want.model)
    throw Error(name + " holds " + c.model + " (" + count_text(c.param_count) + " parameters), not " + want.model);
  if (c.signature == want.signature && c.param_count == want.param_count && c.state_count == want.state_count) return;
  if (c.image_size != want.image_size || c.classes != want.classes)
    throw Error(name + " holds " + what_it_is(c) + ", not " + what_it_is(want) +
                ": use the --image-size (and classes) it was trained with");
  throw Error(name + " holds " + what_it_is_exactly(c) + ", not " + what_it_is_exactly(want) +
              ": the tensors' names or shapes differ (saved by another ringbench version?)");
}

// The format (checkpoint.h), from any source: everything up to the values is checked first; only
// then are they allocated, read once and hashed as they arrive.
Checkpoint decode(ByteSource& in, const std::string& path, const Graph& g) {
  std::string prefix;
  Checkpoint c = read_header(in, path, prefix);
  check_holds(c, g, path);
  Sha256 hash;
  hash.update(prefix.data(), prefix.size());
  read_floats(in, c.param_count, c.params, hash);
  read_floats(in, c.state_count, c.state, hash);
  std::string digest(kDigestChars, '\0');
  in.read(digest.data(), digest.size());
  if (hash.hex() != digest) throw Error("checkpoint " + path + " is damaged: checksum mismatch (truncated or altered)");
  hash.update(digest.data(), digest.size());
  c.file_sha256 = hash.hex();
  return c;
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
  StringSource in(bytes);
  return decode(in, path, g);
}

Checkpoint load_checkpoint(const std::string& path, const Graph& g) {
  FileSource in(path);
  return decode(in, path, g);
}

}  // namespace ringbench::models
