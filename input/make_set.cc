#include "input/make_set.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/errors.h"
#include "base/output_file.h"
#include "input/manifest.h"
#include "input/rng.h"
#include "input/shard_format.h"
#include "input/synth_image.h"

namespace ringbench::input {
namespace {

void make_empty_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0) return;
  struct stat st {};
  if (errno != EEXIST || ::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error(dir + ": cannot make the data set's directory: " + std::strerror(errno));
  std::error_code ec;
  if (!std::filesystem::is_empty(dir, ec) || ec) throw Error(dir + ": exists and is not empty");
}

std::string shard_name(size_t s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard-%05zu.rbs", s);
  return buf;
}

template <typename T>
T median(std::vector<T> v) {
  std::nth_element(v.begin(), v.begin() + ptrdiff_t(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

MakeSummary make_imagenet_like(const std::string& dir, const MakeOptions& o,
                               const std::function<void(uint64_t)>& progress) {
  if (o.images < 1 || o.images > (uint64_t(1) << 24)) throw Error("--images must be 1 to 16777216");
  if (o.classes < 1 || o.classes > kMaxClasses) throw Error("--classes must be 1 to " + std::to_string(kMaxClasses));
  if (o.shard_images < 1 || o.shard_images > kMaxShardRecords) throw Error("--shard-images must be 1 to 1048576");
  if (o.quality < 1 || o.quality > 100) throw Error("--quality must be 1 to 100");
  if ((o.images + o.shard_images - 1) / o.shard_images > kMaxShards)
    throw Error("--images / --shard-images makes more than " + std::to_string(kMaxShards) + " shards");
  make_empty_dir(dir);
  Jpeg jpeg;
  Manifest m;
  m.classes = o.classes;
  MakeSummary sum;
  std::vector<uint32_t> widths, heights, sizes;  // for the medians: 12 bytes an image
  for (uint64_t first = 0; first < o.images; first += o.shard_images) {
    const uint64_t count = std::min<uint64_t>(o.shard_images, o.images - first);
    const std::string name = shard_name(m.shards.size());
    // Streamed to disk, not held whole (a shard may hold a million images): the index's size
    // is fixed by the count, so its place is reserved first and filled in after the records.
    AtomicFileWriter out(dir + "/" + name);
    out.write(std::string(kShardHeaderBytes + count * kShardEntryBytes, '\0'));
    std::vector<ShardRecord> records(count);
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t index = first + i;
      const uint32_t label = uint32_t(splitmix64(o.seed * 0x100000001b3ull + index) % o.classes);
      const ImageShape shape = draw_image_shape(o.seed, index);
      const std::string bytes = jpeg.encode(synth_image(o.seed, index, label, shape), o.quality);
      records[i] = {0, uint32_t(bytes.size()), label, record_crc32(bytes)};
      out.write(bytes);
      widths.push_back(uint32_t(shape.width));
      heights.push_back(uint32_t(shape.height));
      sizes.push_back(uint32_t(bytes.size()));
    }
    const std::string index = encode_shard_index(records);
    if (index.size() != kShardHeaderBytes + count * kShardEntryBytes)
      throw Error(name + ": the shard's index is not the size reserved for it");
    out.write_at(0, index);
    Sha256 hash;
    out.read_back([&](std::string_view chunk) { hash.update(chunk); });
    const uint64_t file_bytes = out.size();
    out.commit();
    m.shards.push_back({name, uint32_t(count), file_bytes, hash.hex()});
    sum.bytes += file_bytes;
    if (progress) progress(first + count);
  }
  write_file_atomic(dir + "/" + kManifestName, format_manifest(m));
  sum.images = o.images;
  sum.shards = m.shards.size();
  sum.median_width = int(median(std::move(widths)));
  sum.median_height = int(median(std::move(heights)));
  sum.median_bytes = median(std::move(sizes));
  return sum;
}

}  // namespace ringbench::input
