// A shard: many JPEGs in one file, found through an index at its start (in the spirit of
// TFRecord and WebDataset's tar shards, with an index so that a reader seeks straight to a record).
// Layout, all integers little-endian:
//   "RBSHARD1"  u32 count  u32 0
//   count x { u64 offset, u32 bytes, u32 label, u32 crc32 (zlib's, of the record's bytes), u32 0 }
//   the records' bytes, in index order, back to back, up to the end of the file
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringbench::input {

struct ShardRecord {
  uint64_t offset = 0;  // from the start of the file
  uint32_t bytes = 0;
  uint32_t label = 0;
  uint32_t crc32 = 0;
};

constexpr size_t kShardHeaderBytes = 16;
constexpr size_t kShardEntryBytes = 24;
constexpr uint32_t kMaxShardRecords = 1u << 20;
constexpr uint32_t kMaxRecordBytes = 64u << 20;

// The CRC-32 a record's index entry holds.
uint32_t record_crc32(std::string_view bytes);

// The header and index of a shard whose records are `records` (their offsets are computed here,
// the records' bytes following the index in order).
std::string encode_shard_index(std::vector<ShardRecord>& records);

// How many bytes the header and index of a shard take, from its first kShardHeaderBytes
// (`header`). Throws Error naming `name` for a bad magic, a nonzero reserved word or more than
// kMaxShardRecords records.
size_t shard_index_bytes(std::string_view header, const std::string& name);

// The records of a shard whose header and index are `head` (shard_index_bytes() of them) and
// whose file holds `file_bytes`. Every entry is checked: records back to back from the end of
// the index to the end of the file, sizes in (0, kMaxRecordBytes], labels below `classes`.
// Throws Error naming `name` and the record at fault.
std::vector<ShardRecord> decode_shard_index(std::string_view head, uint64_t file_bytes, uint32_t classes,
                                            const std::string& name);

}  // namespace ringbench::input
