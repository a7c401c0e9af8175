// The packed image set: manifest.txt and its shards.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

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

// Opens a shard to read, closed by the caller. Out of descriptors is the process's fault, not the
// shard's: ResourceError. Any other failure: -1 with `why`.
int open_shard_file(const std::string& path, std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE))
    throw ResourceError(path + ": cannot open the shard: " + std::strerror(errno) +
                        " (the process is out of file descriptors: raise ulimit -n)");
  if (fd < 0) why = std::string("cannot open the shard: ") + std::strerror(errno);
  return fd;
}

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

struct Shard {
  std::string path;
  std::string damage;  // why every read of it fails ("" while none is known)
  bool loaded = false;  // its index read (or found damaged), under PackedSet::mu_
  std::vector<ShardRecord> records;
};

// Every rank stats every shard (no descriptor kept), so that a set mostly missing is refused on
// every rank alike; a rank opens only the shards it reads, when it reads them, and closes them.
class PackedSet : public ImageSet {
 public:
  explicit PackedSet(const std::string& dir) : manifest_path_(dir + "/" + kManifestName) {
    manifest_ = parse_manifest(read_input_file(manifest_path_, "the image set manifest", kMaxConfigBytes),
                               manifest_path_);
    size_t unusable = 0;
    for (const ManifestShard& m : manifest_.shards) {
      first_.push_back(size_);
      size_ += m.records;
      shards_.push_back(Shard{dir + "/" + m.file, stat_damage(dir + "/" + m.file, m), false, {}});
      if (!shards_.back().damage.empty()) ++unusable;
    }
    if (unusable * 2 > shards_.size())
      throw Error(manifest_path_ + ": " + std::to_string(unusable) + " of its " + std::to_string(shards_.size()) +
                  " shards are missing or not as it says (" + shards_[first_unusable()].path + ": " +
                  shards_[first_unusable()].damage + "): is this the set's directory?");
  }

  size_t size() const override { return size_; }
  uint32_t classes() const override { return manifest_.classes; }
  uint32_t label(size_t i) const override {
    const auto [s, r] = locate(i);
    const Shard& shard = loaded(s);
    return shard.records.empty() ? 0 : shard.records[r].label;
  }
  std::vector<size_t> rank_records(int rank, int n) const override {
    std::vector<size_t> out;
    out.reserve(rank_record_count(rank, n));
    for (size_t s = size_t(rank); s < shards_.size(); s += size_t(n))
      for (size_t r = 0; r < manifest_.shards[s].records; ++r) out.push_back(first_[s] + r);
    return out;
  }
  size_t rank_record_count(int rank, int n) const override {
    size_t count = 0;
    for (size_t s = size_t(rank); s < shards_.size(); s += size_t(n)) count += manifest_.shards[s].records;
    return count;
  }
  std::vector<std::string> unreadable_shards(int rank, int n) const override {
    std::vector<std::string> out;
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t s = size_t(rank); s < shards_.size(); s += size_t(n))
      if (!shards_[s].damage.empty()) out.push_back(shards_[s].path + ": " + shards_[s].damage);
    return out;
  }
  std::string read(size_t i) const override {
    const auto [s, r] = locate(i);
    const Shard& shard = loaded(s);
    if (!shard.damage.empty()) throw Error(name(i) + ": " + shard.damage);
    const ShardRecord& rec = shard.records[r];
    std::string why;
    const FdCloser fd{open_shard_file(shard.path, why)};
    if (fd.fd < 0) throw Error(name(i) + ": " + why);
    std::string bytes(rec.bytes, '\0');
    if (!pread_all(fd.fd, bytes.data(), bytes.size(), rec.offset, why)) throw Error(name(i) + ": " + why);
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

  size_t first_unusable() const {
    size_t s = 0;
    while (shards_[s].damage.empty()) ++s;
    return s;
  }

  static std::string stat_damage(const std::string& path, const ManifestShard& m) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return std::string("cannot open the shard: ") + std::strerror(errno);
    if (!S_ISREG(st.st_mode)) return std::string("the shard is ") + file_type_name(st.st_mode);
    if (uint64_t(st.st_size) != m.bytes)
      return "the shard has " + std::to_string(st.st_size) + " bytes, the manifest says " + std::to_string(m.bytes);
    return "";
  }

  // Shard s with its index read: once, by the first reader (the index is a few KB).
  const Shard& loaded(size_t s) const {
    std::lock_guard<std::mutex> lock(mu_);
    Shard& shard = shards_[s];
    if (!shard.loaded) {
      if (shard.damage.empty()) shard.damage = read_index(shard, manifest_.shards[s]);
      if (!shard.damage.empty()) shard.records.clear();
      shard.loaded = true;
    }
    return shard;
  }

  std::string read_index(Shard& s, const ManifestShard& m) const {
    std::string why;
    const FdCloser fd{open_shard_file(s.path, why)};
    if (fd.fd < 0) return why;
    struct stat st {};
    if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::string("the shard is ") + file_type_name(st.st_mode);
    if (uint64_t(st.st_size) != m.bytes)
      return "the shard has " + std::to_string(st.st_size) + " bytes, the manifest says " + std::to_string(m.bytes);
    try {
      std::string head(kShardHeaderBytes, '\0');
      if (!pread_all(fd.fd, head.data(), head.size(), 0, why)) return why;
      head.resize(std::min<uint64_t>(shard_index_bytes(head, s.path), m.bytes));
      if (!pread_all(fd.fd, head.data(), head.size(), 0, why)) return why;
      s.records = decode_shard_index(head, m.bytes, manifest_.classes, s.path);
      if (s.records.size() != m.records)
        return "the shard holds " + std::to_string(s.records.size()) + " records, the manifest says " +
               std::to_string(m.records);
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  }

  std::string manifest_path_;
  Manifest manifest_;
  mutable std::mutex mu_;  // guards shards_' lazy indexes
  mutable std::vector<Shard> shards_;
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
