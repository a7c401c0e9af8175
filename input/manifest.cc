#include "input/manifest.h"

#include <openssl/evp.h>

#include <charconv>
#include <set>

#include "base/errors.h"
#include "base/input_file.h"

namespace ringbench::input {
namespace {

constexpr const char* kFirstLine = "ringbench-images 1";
constexpr uint64_t kMaxShardBytes = uint64_t(1) << 40;

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

uint64_t number(std::string_view w, uint64_t lo, uint64_t hi, const std::string& where, const char* what) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
  if (ec != std::errc() || end != w.data() + w.size() || v < lo || v > hi)
    throw Error(where + ": " + what + " " + quote_excerpt(w) + " is not a number from " + std::to_string(lo) +
                " to " + std::to_string(hi));
  return v;
}

bool plain_file_name(std::string_view s) {
  if (s.empty() || s.size() > 64 || s[0] == '.') return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return false;
  return true;
}

bool hex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

ManifestShard parse_shard(const std::vector<std::string_view>& w, const std::string& where) {
  if (w.size() != 5) throw Error(where + ": a shard line is 'shard FILE RECORDS BYTES SHA256'");
  ManifestShard s;
  if (!plain_file_name(w[1]))
    throw Error(where + ": shard file " + quote_excerpt(w[1]) + " is not a plain name (letters, digits, . _ -)");
  s.file = std::string(w[1]);
  s.records = uint32_t(number(w[2], 1, 1u << 20, where, "the record count"));
  s.bytes = number(w[3], 1, kMaxShardBytes, where, "the byte count");
  if (!hex64(w[4])) throw Error(where + ": " + quote_excerpt(w[4]) + " is not a SHA-256 in lowercase hex");
  s.sha256 = std::string(w[4]);
  return s;
}

}  // namespace

uint64_t Manifest::images() const {
  uint64_t n = 0;
  for (const ManifestShard& s : shards) n += s.records;
  return n;
}

std::string format_manifest(const Manifest& m) {
  std::string out = std::string(kFirstLine) + "\nclasses " + std::to_string(m.classes) + "\n";
  for (const ManifestShard& s : m.shards)
    out += "shard " + s.file + " " + std::to_string(s.records) + " " + std::to_string(s.bytes) + " " + s.sha256 + "\n";
  return out;
}

Manifest parse_manifest(std::string_view text, const std::string& name) {
  Manifest m;
  uint64_t images = 0;
  std::set<std::string> seen;
  size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    const std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    const std::string where = name + " line " + std::to_string(++line_no);
    if (line_no == 1) {
      if (line != kFirstLine) throw Error(name + ": not a ringbench image set manifest (no '" + kFirstLine + "' line)");
      continue;
    }
    const std::vector<std::string_view> w = words(line);
    if (w.empty()) continue;
    if (w[0] == "classes" && w.size() == 2 && m.classes == 0) {
      m.classes = uint32_t(number(w[1], 1, kMaxClasses, where, "the class count"));
    } else if (w[0] == "shard") {
      if (m.shards.size() >= kMaxShards) throw Error(where + ": more than " + std::to_string(kMaxShards) + " shards");
      m.shards.push_back(parse_shard(w, where));
      images += m.shards.back().records;
      if (images > kMaxSetImages)
        throw Error(where + ": the shards hold more than " + std::to_string(kMaxSetImages) + " images in all");
      if (!seen.insert(m.shards.back().file).second) throw Error(where + ": shard " + m.shards.back().file + " again");
    } else {
      throw Error(where + ": " + quote_excerpt(line) + " is not 'classes N' (once) or a shard line");
    }
  }
  if (line_no == 0) throw Error(name + ": empty, not a ringbench image set manifest");
  if (m.classes == 0) throw Error(name + ": no 'classes N' line");
  if (m.shards.empty()) throw Error(name + ": no shards");
  return m;
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) != 1)
    throw Error("SHA-256: libcrypto could not start a digest");
}
Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }
void Sha256::update(std::string_view bytes) {
  if (EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), bytes.data(), bytes.size()) != 1)
    throw Error("SHA-256: libcrypto failed");
}
std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &len) != 1) throw Error("SHA-256: libcrypto failed");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 h;
  h.update(bytes);
  return h.hex();
}

}  // namespace ringbench::input
