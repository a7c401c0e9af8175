#include "input/shard_format.h"

#include <zlib.h>

#include <cstring>

#include "base/errors.h"

namespace ringbench::input {
namespace {

constexpr char kMagic[] = "RBSHARD1";

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}
uint64_t get_le(std::string_view s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | uint8_t(s[at + size_t(i)]);
  return v;
}

}  // namespace

uint32_t record_crc32(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  size_t done = 0;
  while (done < bytes.size()) {  // zlib takes a uInt length
    const size_t chunk = std::min<size_t>(bytes.size() - done, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + done), uInt(chunk));
    done += chunk;
  }
  return uint32_t(crc);
}

std::string encode_shard_index(std::vector<ShardRecord>& records) {
  std::string out(kMagic, 8);
  put_u32(out, uint32_t(records.size()));
  put_u32(out, 0);
  uint64_t offset = kShardHeaderBytes + kShardEntryBytes * records.size();
  for (ShardRecord& r : records) {
    r.offset = offset;
    offset += r.bytes;
    put_u64(out, r.offset);
    put_u32(out, r.bytes);
    put_u32(out, r.label);
    put_u32(out, r.crc32);
    put_u32(out, 0);
  }
  return out;
}

size_t shard_index_bytes(std::string_view header, const std::string& name) {
  if (header.size() < kShardHeaderBytes || std::memcmp(header.data(), kMagic, 8) != 0)
    throw Error(name + ": not a ringbench shard (no RBSHARD1 header)");
  const uint64_t count = get_le(header, 8, 4);
  if (get_le(header, 12, 4) != 0) throw Error(name + ": the header's reserved word is not 0");
  if (count > kMaxShardRecords)
    throw Error(name + ": " + std::to_string(count) + " records, more than the " + std::to_string(kMaxShardRecords) +
                " a shard may hold");
  return kShardHeaderBytes + kShardEntryBytes * size_t(count);
}

std::vector<ShardRecord> decode_shard_index(std::string_view head, uint64_t file_bytes, uint32_t classes,
                                            const std::string& name) {
  const size_t index_bytes = shard_index_bytes(head, name);
  if (head.size() < index_bytes || file_bytes < index_bytes)
    throw Error(name + ": the file ends inside its index (" + std::to_string(index_bytes) + " bytes)");
  const size_t count = (index_bytes - kShardHeaderBytes) / kShardEntryBytes;
  std::vector<ShardRecord> records(count);
  uint64_t expected = index_bytes;
  for (size_t i = 0; i < count; ++i) {
    const size_t at = kShardHeaderBytes + i * kShardEntryBytes;
    ShardRecord& r = records[i];
    r.offset = get_le(head, at, 8);
    r.bytes = uint32_t(get_le(head, at + 8, 4));
    r.label = uint32_t(get_le(head, at + 12, 4));
    r.crc32 = uint32_t(get_le(head, at + 16, 4));
    const std::string what = name + ": record " + std::to_string(i) + " ";
    if (get_le(head, at + 20, 4) != 0) throw Error(what + "has a nonzero reserved word");
    if (r.offset != expected) throw Error(what + "does not start where the one before it ends");
    if (r.bytes == 0 || r.bytes > kMaxRecordBytes)
      throw Error(what + "has " + std::to_string(r.bytes) + " bytes (must be 1 to " + std::to_string(kMaxRecordBytes) +
                  ")");
    if (r.label >= classes)
      throw Error(what + "has label " + std::to_string(r.label) + " (the set has " + std::to_string(classes) +
                  " classes)");
    expected += r.bytes;
    if (expected > file_bytes) throw Error(what + "runs past the end of the file");
  }
  if (expected != file_bytes)
    throw Error(name + ": " + std::to_string(file_bytes - expected) + " bytes after the last record");
  return records;
}

}  // namespace ringbench::input
