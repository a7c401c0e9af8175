#include "collectives/transport/shm/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#include "base/errors.h"
#include "collectives/auth.h"

namespace ringbench::shm_segment {
namespace {

using namespace shm_layout;

constexpr char kNamePrefix[] = "/rb-";
constexpr size_t kMaxNameBytes = 200;

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

// "/rb-<job id, reduced to name characters>-<rank>-<16 random hex digits>": the job id tells an
// operator whose it is; the random part makes it unguessable and unique.
std::string new_name(const std::string& job_id, int rank) {
  std::string job;
  for (char c : job_id.substr(0, 32)) job.push_back(name_char(c) ? c : '_');
  return kNamePrefix + job + "-" + std::to_string(rank) + "-" + auth::to_hex(auth::random_bytes(8));
}

bool plausible_name(const std::string& name) {
  if (name.size() <= sizeof kNamePrefix || name.size() > kMaxNameBytes ||
      name.compare(0, sizeof kNamePrefix - 1, kNamePrefix) != 0)
    return false;
  for (size_t i = 1; i < name.size(); ++i)
    if (!name_char(name[i])) return false;
  return true;
}

// Sizes the object with its pages reserved; tmpfs without fallocate gets a sparse ftruncate.
void reserve(int fd, size_t bytes, const std::string& name) {
  int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc == EOPNOTSUPP || rc == EINVAL) {
    check_errno(::ftruncate(fd, static_cast<off_t>(bytes)) == 0, "ftruncate " + name);
    return;
  }
  if (rc != 0)
    throw Error("cannot reserve " + std::to_string(bytes >> 20) + " MiB of shared memory for " + name +
                " (" + std::strerror(rc) + "): is /dev/shm full? A smaller ring_bytes needs less");
}

char* map(int fd, size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

void init_header(char* base, const std::string& job_id, int rank, int world_size, size_t ring_bytes) {
  SegmentIdentity* h = &(new (base) SegmentHeader())->id;
  std::memcpy(h->magic, kShmMagic, sizeof kShmMagic);
  h->version = kVersion;
  h->world_size = static_cast<uint32_t>(world_size);
  h->rank = static_cast<uint32_t>(rank);
  h->ring_bytes = ring_bytes;
  h->segment_bytes = segment_bytes(world_size, ring_bytes);
  std::strncpy(h->job_id, job_id.c_str(), sizeof h->job_id - 1);
  h->pid = ::getpid();
  h->pid_ns = pid_namespace();
  h->probe_addr = reinterpret_cast<uintptr_t>(h->magic);
  for (int i = 0; i < world_size; ++i)
    new (base + controls_offset() + sizeof(RingControl) * static_cast<size_t>(i)) RingControl();
}

// Whether the segment `name` (in /dev/shm) is ours and its creator, of our pid namespace, is
// gone: a rank killed between creating its segment and the end of setup leaves its name behind.
bool left_by_a_dead_process(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
  if (fd < 0) return false;
  struct stat st {};
  void* p = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
      static_cast<size_t>(st.st_size) >= sizeof(SegmentIdentity))
    p = ::mmap(nullptr, sizeof(SegmentIdentity), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return false;
  SegmentIdentity id;
  std::memcpy(&id, p, sizeof id);  // one read of memory another process may change
  ::munmap(p, sizeof(SegmentIdentity));
  if (std::memcmp(id.magic, kShmMagic, sizeof kShmMagic) != 0 || id.pid_ns == 0 || id.pid_ns != pid_namespace()) return false;
  if (id.pid <= 0 || id.pid > INT32_MAX || id.pid == ::getpid()) return false;
  return ::kill(static_cast<pid_t>(id.pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

void remove_stale_segments() noexcept {
  DIR* d = ::opendir("/dev/shm");
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = std::string("/") + e->d_name;
    if (plausible_name(name) && left_by_a_dead_process(name)) ::shm_unlink(name.c_str());
  }
  ::closedir(d);
}

// Swaps, so that `o`'s destructor releases what this held (running our own destructor here
// would end name_'s lifetime before assigning to it).
Segment& Segment::operator=(Segment&& o) noexcept {
  std::swap(base_, o.base_);
  std::swap(bytes_, o.bytes_);
  std::swap(name_, o.name_);
  std::swap(linked_, o.linked_);
  return *this;
}

Segment::~Segment() {
  if (base_) ::munmap(base_, bytes_);
  base_ = nullptr;
  unlink();
}

void Segment::unlink() noexcept {
  if (linked_) ::shm_unlink(name_.c_str());
  linked_ = false;
}

Segment Segment::create(const std::string& job_id, int rank, int world_size, size_t ring_bytes) {
  remove_stale_segments();
  Segment s;
  s.name_ = new_name(job_id, rank);
  s.bytes_ = segment_bytes(world_size, ring_bytes);
  int fd = ::shm_open(s.name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  check_errno(fd >= 0, "shm_open " + s.name_);
  s.linked_ = true;  // from here on, a failure removes it again
  try {
    check_errno(::fchmod(fd, 0600) == 0, "fchmod " + s.name_);  // whatever the umask
    reserve(fd, s.bytes_, s.name_);
    s.base_ = map(fd, s.bytes_);
    check_errno(s.base_ != nullptr, "mmap " + s.name_);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  init_header(s.base_, job_id, rank, world_size, ring_bytes);
  return s;
}

Segment Segment::open(const std::string& name, size_t bytes, int peer) {
  if (!plausible_name(name))
    throw IoError(peer, "published an implausible segment name (" + std::to_string(name.size()) + " bytes)");
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) throw IoError(peer, "cannot open its segment " + name + ": " + std::strerror(errno));
  struct stat st {};
  std::string bad;
  if (::fstat(fd, &st) != 0)
    bad = std::string("fstat failed: ") + std::strerror(errno);
  else if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
    bad = "it is not a private object of this user (uid " + std::to_string(st.st_uid) + ", mode " +
          std::to_string(st.st_mode & 0777) + ")";
  else if (static_cast<uint64_t>(st.st_size) != bytes)
    bad = "it has " + std::to_string(st.st_size) + " bytes where " + std::to_string(bytes) + " are expected";
  Segment s;
  if (bad.empty() && !(s.base_ = map(fd, bytes))) bad = std::string("mmap failed: ") + std::strerror(errno);
  ::close(fd);
  if (!bad.empty()) throw IoError(peer, "its segment " + name + " is unusable: " + bad);
  s.bytes_ = bytes;
  s.name_ = name;
  return s;
}

RingControl* Segment::control(size_t slot) const {
  return reinterpret_cast<RingControl*>(base_ + controls_offset() + sizeof(RingControl) * slot);
}

char* Segment::ring(size_t slot, int world_size, size_t ring_bytes) const {
  return base_ + rings_offset(world_size) + ring_bytes * slot;
}

PeerProcess validate_header(const Segment& seg, int peer, int world_size, size_t ring_bytes,
                            const std::string& job_id) {
  // Copied first: the peer may change it while we look.
  SegmentIdentity h = seg.header().id;
  auto bad = [&](const std::string& what) {
    return IoError(peer, "its segment " + seg.name() + " is not a valid ringbench segment of this job: " + what);
  };
  if (std::memcmp(h.magic, kShmMagic, sizeof kShmMagic) != 0) throw bad("bad magic");
  if (h.version != kVersion)
    throw bad("version " + std::to_string(h.version) + ", this rank speaks " + std::to_string(kVersion));
  if (h.world_size != static_cast<uint32_t>(world_size) || h.rank != static_cast<uint32_t>(peer))
    throw bad("it is rank " + std::to_string(h.rank) + " of " + std::to_string(h.world_size) +
              ", expected rank " + std::to_string(peer) + " of " + std::to_string(world_size));
  if (h.ring_bytes != ring_bytes || h.segment_bytes != segment_bytes(world_size, ring_bytes))
    throw bad("ring_bytes " + std::to_string(h.ring_bytes) + ", this rank uses " + std::to_string(ring_bytes));
  h.job_id[sizeof h.job_id - 1] = 0;
  if (job_id != h.job_id) throw bad("job id '" + std::string(h.job_id) + "', this job is '" + job_id + "'");
  if (h.pid <= 0) throw bad("pid " + std::to_string(h.pid));
  return {h.pid, h.pid_ns, h.probe_addr};
}

bool can_read_memory_of(const PeerProcess& p) {
  if (p.pid_ns == 0 || p.pid_ns != pid_namespace()) return false;
  char got[sizeof kShmMagic] = {};
  iovec local{got, sizeof got}, remote{reinterpret_cast<void*>(p.probe_addr), sizeof got};
  return ::process_vm_readv(static_cast<pid_t>(p.pid), &local, 1, &remote, 1, 0) == ssize_t(sizeof got) &&
         std::memcmp(got, kShmMagic, sizeof kShmMagic) == 0;
}

uint64_t pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace ringbench::shm_segment
