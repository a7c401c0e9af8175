// A packed image set's manifest (DIR/manifest.txt): its classes and shards, with each shard's
// record count, size and SHA-256. Plain text, one item a line:
//   ringbench-images 1
//   classes 1000
//   shard shard-00000.rbs 256 28311552 <64 hex digits>
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringbench::input {

struct ManifestShard {
  std::string file;  // a plain name inside the set's directory
  uint32_t records = 0;
  uint64_t bytes = 0;
  std::string sha256;  // lowercase hex
};

struct Manifest {
  uint32_t classes = 0;
  std::vector<ManifestShard> shards;
  uint64_t images() const;
};

constexpr const char* kManifestName = "manifest.txt";
constexpr uint32_t kMaxClasses = 100000;
constexpr size_t kMaxShards = 100000;
// A set's images in all (ImageNet-21k has 14M): bounds what a manifest alone makes a rank allocate.
constexpr uint64_t kMaxSetImages = uint64_t(20) << 20;

std::string format_manifest(const Manifest& m);

// Parses a manifest read from `name`. Every line is checked (a known keyword, numbers in range,
// shard files plain names that appear once, SHA-256 in hex, at most kMaxSetImages images); throws Error naming `name`, the
// line and what is wrong, quoting at most a short excerpt of it.
Manifest parse_manifest(std::string_view text, const std::string& name);

// SHA-256 of `bytes` in lowercase hex (OpenSSL's libcrypto).
std::string sha256_hex(std::string_view bytes);

// Incremental SHA-256, for files hashed in chunks.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(std::string_view bytes);
  std::string hex();  // ends the hash

 private:
  void* ctx_;
};

}  // namespace ringbench::input
