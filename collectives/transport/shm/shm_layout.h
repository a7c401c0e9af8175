// The shm transport's segment layout. Every rank creates one segment holding what its peers
// write to it: a header (identity, heartbeat, doorbell, abort) and one single-producer/
// single-consumer ring per peer that sends to it. A peer's segment is mapped by every rank, so
// both ends of a directed pair reach the ring; it lives in the receiver's segment.
//
// Everything here is shared with processes we do not trust beyond their uid: identity fields are
// read once at setup, validated and copied; only head/tail, the heartbeat, the doorbell and the
// flags are read later, and each use checks them. Internal to the collectives library.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ringbench::shm_layout {

inline constexpr char kShmMagic[8] = {'R', 'B', 'S', 'H', 'M', 'S', 'E', 'G'};
inline constexpr uint32_t kVersion = 3;  // 3: payloads padded to 8 bytes
inline constexpr uint32_t kFrameMagic = 0x444d4853;     // "SHMD": the payload follows in the ring
inline constexpr uint32_t kFrameMagicCma = 0x434d4853;  // "SHMC": the receiver reads it at `addr`
inline constexpr size_t kJobIdBytes = 64;
inline constexpr size_t kMaxAbortText = 4096;
inline constexpr size_t kPage = 4096;
inline constexpr size_t kMinRingBytes = 4096;
inline constexpr size_t kMaxRingBytes = size_t{1} << 30;
inline constexpr int kMaxRanks = 4096;

// SegmentHeader::flags
inline constexpr uint32_t kBye = 1;      // the rank closed its transport
inline constexpr uint32_t kAborted = 2;  // the rank aborted; abort_text says why

static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free to work across processes");

// Written once by the creator before it publishes the segment's name.
struct SegmentIdentity {
  char magic[8];
  uint32_t version, world_size, rank, reserved;
  uint64_t ring_bytes, segment_bytes;
  char job_id[kJobIdBytes];
  int64_t pid;
  uint64_t pid_ns;  // inode of /proc/self/ns/pid: pids compare only within one namespace
  uint64_t probe_addr;  // where this magic lies in the creator's memory, to probe CMA with
};

struct SegmentHeader {
  SegmentIdentity id;
  alignas(64) std::atomic<uint64_t> heartbeat;  // bumped every heartbeat interval
  // The doorbell: a futex word peers bump (then FUTEX_WAKE) when this rank has something to do
  // and `sleepers` says a thread of it is asleep.
  alignas(64) std::atomic<uint32_t> bell;
  std::atomic<uint32_t> sleepers;
  alignas(64) std::atomic<uint32_t> flags;  // kBye | kAborted
  uint32_t abort_len;
  char abort_text[kMaxAbortText];
};

// The indexes of one ring: bytes ever written (by the sender) and ever consumed (by the
// receiver). head - tail is what is in the ring; the offset of a position is pos % ring_bytes.
// `acked` counts the single-copy messages the receiver has read out of the sender's memory;
// `cma_ok` is set by the receiver at setup when it can read the sender's memory.
struct RingControl {
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) std::atomic<uint64_t> tail;
  std::atomic<uint64_t> acked;
  std::atomic<uint32_t> cma_ok;
};

// What precedes every message in a ring. `seq` counts the messages of the pair from 0; `addr`
// is where a single-copy (kFrameMagicCma) payload lies in the sender's memory.
struct FrameHeader {
  uint32_t magic;
  uint32_t seq;
  uint64_t tag;
  uint64_t length;
  uint64_t addr;
};
static_assert(sizeof(FrameHeader) % 8 == 0, "a frame header keeps the ring's positions aligned");

constexpr size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

inline constexpr size_t kHeaderBytes = round_up(sizeof(SegmentHeader), kPage);

// The ring of messages from `src` lives in the segment of `dst`, at slot src (or src - 1 past
// dst: a rank sends nothing to itself).
constexpr size_t ring_slot(int src, int dst) { return static_cast<size_t>(src < dst ? src : src - 1); }

constexpr size_t controls_offset() { return kHeaderBytes; }
constexpr size_t rings_offset(int world_size) {
  return kHeaderBytes + round_up(sizeof(RingControl) * static_cast<size_t>(world_size), kPage);
}
constexpr size_t segment_bytes(int world_size, size_t ring_bytes) {
  return rings_offset(world_size) + ring_bytes * static_cast<size_t>(world_size - 1);
}

}  // namespace ringbench::shm_layout
