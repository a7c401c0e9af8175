// A shm transport segment (layout in shm_layout.h): creating this rank's, opening a peer's, and
// validating what a peer's header claims. Internal to the shm transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "collectives/transport/shm/shm_layout.h"

namespace ringbench::shm_segment {

// A mapped segment. Unmaps on destruction, and removes the name while it still owns it.
class Segment {
 public:
  Segment() = default;
  Segment(Segment&& o) noexcept { *this = std::move(o); }
  Segment& operator=(Segment&& o) noexcept;
  ~Segment();

  // Creates, sizes (with the pages reserved, so a full /dev/shm is an error now rather than a
  // SIGBUS later) and maps a new segment for `rank`, with its header and ring indexes set up.
  static Segment create(const std::string& job_id, int rank, int world_size, size_t ring_bytes);
  // Maps the segment called `name` that rank `peer` published. Throws IoError(peer) when the
  // name is implausible, or the object is not a private regular file of our uid of `bytes`.
  static Segment open(const std::string& name, size_t bytes, int peer);
  // Removes the name (mappings stay valid); idempotent.
  void unlink() noexcept;

  const std::string& name() const { return name_; }
  shm_layout::SegmentHeader& header() const { return *reinterpret_cast<shm_layout::SegmentHeader*>(base_); }
  shm_layout::RingControl* control(size_t slot) const;
  char* ring(size_t slot, int world_size, size_t ring_bytes) const;

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
  std::string name_;
  bool linked_ = false;  // this process created the name and has not removed it yet
};

// What a peer's header claims about its process, once validated.
struct PeerProcess {
  int64_t pid = 0;
  uint64_t pid_ns = 0;
  uint64_t probe_addr = 0;
};

// Checks the header of rank `peer`'s segment against what this rank expects (magic, version,
// world size, rank, ring and segment sizes, job id, pid). Throws IoError(peer) naming the field.
PeerProcess validate_header(const Segment& seg, int peer, int world_size, size_t ring_bytes,
                            const std::string& job_id);

// Whether this process may read `p`'s memory with process_vm_readv (same pid namespace, ptrace
// permission: same uid, and no Yama or seccomp rule against it): it reads the probe.
bool can_read_memory_of(const PeerProcess& p);

// Removes the segments in /dev/shm that are ours (this uid, our magic) and whose creator, in
// our pid namespace, no longer exists: a rank killed during setup, before the name is removed,
// leaves its segment behind. Every create() calls it first, so the next job cleans up.
void remove_stale_segments() noexcept;

// The inode of this process's pid namespace, 0 when unknown.
uint64_t pid_namespace();

}  // namespace ringbench::shm_segment
