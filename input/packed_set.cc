// The packed image set: manifest.txt and its shards.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/errors.h"
#include "base/input_file.h"
#include "input/image_set.h"
#include "input/manifest.h"
#include "input/shard_format.h"

namespace ringbench::input {
namespace {

// Reads exactly `n` bytes at `offset`, or says why not.
bool pread_all(int fd, char* out, size_t n, uint64_t offset, std::string& why) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, out + done, n - done, off_t(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      why = r == 0 ? "the file ends early" : std::strerror(errno);
      return false;
    }
    done += size_t(r);
  }
  return true;
}

struct Shard {
  std::string path, file;
  int fd = -1;
  std::vector<ShardRecord> records;
  std::string damage;  // why every read of it fails ("" when it opened well)
};

class PackedSet : public ImageSet {
 public:
  explicit PackedSet(const std::string& dir) {
    const std::string path = dir + "/" + kManifestName;
    manifest_ = parse_manifest(read_input_file(path, "the image set manifest", kMaxConfigBytes), path);
    for (const ManifestShard& m : manifest_.shards) {
      first_.push_back(size_);
      size_ += m.records;
      shards_.push_back(open_shard(dir, m));
    }
  }
  ~PackedSet() override {
    for (Shard& s : shards_)
      if (s.fd >= 0) ::close(s.fd);
  }

  size_t size() const override { return size_; }
  uint32_t classes() const override { return manifest_.classes; }
  uint32_t label(size_t i) const override {
    const auto [s, r] = locate(i);
    return shards_[s].records.empty() ? 0 : shards_[s].records[r].label;
  }
  std::vector<size_t> rank_records(int rank, int n) const override {
    std::vector<size_t> out;
    for (size_t s = size_t(rank); s < shards_.size(); s += size_t(n))
      for (size_t r = 0; r < manifest_.shards[s].records; ++r) out.push_back(first_[s] + r);
    return out;
  }
  std::string read(size_t i) const override {
    const auto [s, r] = locate(i);
    const Shard& shard = shards_[s];
    if (!shard.damage.empty()) throw Error(name(i) + ": " + shard.damage);
    const ShardRecord& rec = shard.records[r];
    std::string bytes(rec.bytes, '\0');
    std::string why;
    if (!pread_all(shard.fd, bytes.data(), bytes.size(), rec.offset, why)) throw Error(name(i) + ": " + why);
    if (record_crc32(bytes) != rec.crc32) throw Error(name(i) + ": its CRC-32 is not the index's (damaged)");
    return bytes;
  }
  std::string name(size_t i) const override {
    const auto [s, r] = locate(i);
    return shards_[s].path + " record " + std::to_string(r);
  }
  std::string describe() const override {
    return "packed, " + std::to_string(shards_.size()) + " shards, " + std::to_string(size_) + " images, " +
           std::to_string(manifest_.classes) + " classes";
  }

 private:
  std::pair<size_t, size_t> locate(size_t i) const {
    const size_t s = size_t(std::upper_bound(first_.begin(), first_.end(), i) - first_.begin()) - 1;
    return {s, i - first_[s]};
  }

  Shard open_shard(const std::string& dir, const ManifestShard& m) const {
    Shard s{dir + "/" + m.file, m.file, -1, {}, ""};
    s.fd = ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st {};
    if (s.fd < 0) {
      s.damage = std::string("cannot open the shard: ") + std::strerror(errno);
    } else if (::fstat(s.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      s.damage = std::string("the shard is ") + file_type_name(st.st_mode);
    } else if (uint64_t(st.st_size) != m.bytes) {
      s.damage = "the shard has " + std::to_string(st.st_size) + " bytes, the manifest says " + std::to_string(m.bytes);
    } else {
      s.damage = read_index(s, m, uint64_t(st.st_size));
    }
    return s;
  }

  std::string read_index(Shard& s, const ManifestShard& m, uint64_t file_bytes) const {
    try {
      std::string head(kShardHeaderBytes, '\0');
      std::string why;
      if (!pread_all(s.fd, head.data(), head.size(), 0, why)) return why;
      head.resize(std::min<uint64_t>(shard_index_bytes(head, s.path), file_bytes));
      if (!pread_all(s.fd, head.data(), head.size(), 0, why)) return why;
      s.records = decode_shard_index(head, file_bytes, manifest_.classes, s.path);
      if (s.records.size() != m.records)
        return "the shard holds " + std::to_string(s.records.size()) + " records, the manifest says " +
               std::to_string(m.records);
      return "";
    } catch (const Error& e) {
      s.records.clear();
      return e.what();
    }
  }

  Manifest manifest_;
  std::vector<Shard> shards_;
  std::vector<size_t> first_;  // index of each shard's first record
  size_t size_ = 0;
};

}  // namespace

std::unique_ptr<ImageSet> open_packed_set(const std::string& dir) { return std::make_unique<PackedSet>(dir); }

std::vector<std::string> verify_packed_set(const std::string& dir) {
  const std::string path = dir + "/" + kManifestName;
  const Manifest m = parse_manifest(read_input_file(path, "the image set manifest", kMaxConfigBytes), path);
  std::vector<std::string> problems;
  for (const ManifestShard& s : m.shards) {
    const std::string file = dir + "/" + s.file;
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      problems.push_back(file + ": " + (fd < 0 ? std::strerror(errno) : file_type_name(st.st_mode)));
      if (fd >= 0) ::close(fd);
      continue;
    }
    Sha256 h;
    std::string chunk(size_t(1) << 20, '\0');
    uint64_t at = 0;
    for (ssize_t r; (r = ::pread(fd, chunk.data(), chunk.size(), off_t(at))) > 0; at += uint64_t(r))
      h.update(std::string_view(chunk.data(), size_t(r)));
    ::close(fd);
    if (at != s.bytes)
      problems.push_back(file + ": " + std::to_string(at) + " bytes, the manifest says " + std::to_string(s.bytes));
    else if (h.hex() != s.sha256)
      problems.push_back(file + ": its SHA-256 is not the manifest's");
  }
  return problems;
}

}  // namespace ringbench::input
