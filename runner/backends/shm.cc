// Our ring over shared memory (collectives/transport/shm/): ranks of one host only. Ranks on
// other hosts, or in other network namespaces (the nodes of an emulated cluster share this
// host's /dev/shm), are refused before any segment is made: shared memory between them would
// bypass the network the run is meant to measure.
#include <sys/stat.h>

#include "base/errors.h"
#include "collectives/transport/shm/shm_transport.h"
#include "runner/backends/ring.h"
#include "runner/cli/metadata.h"
#include "runner/cli/world.h"

namespace ringbench {
namespace {

// This host and network namespace: the kernel's boot id and the namespace's inode.
std::string host_identity() {
  struct stat ns {};
  const std::string net = ::stat("/proc/self/ns/net", &ns) == 0 ? std::to_string(ns.st_ino) : "?";
  return "boot " + read_first_line("/proc/sys/kernel/random/boot_id") + " netns " + net;
}

std::unique_ptr<Transport> connect_shm(const BackendSetup& s) {
  check_same_options(s.store, s.key_prefix + "/shm_host", host_identity(), s.rank, s.size, s.timeout,
                     "run on one host, in one network namespace, for --transport shm (shared memory "
                     "connects only the ranks of one host; use tcp or verbs between hosts)");
  ShmOptions o;
  o.timeout = s.timeout;
  o.spin = s.net.spin;
  o.job_id = s.world.job_id;
  return make_shm_transport(s.store, s.rank, s.size, o);
}

Backend shm() {
  Backend b = ring_backend("shm", 30, "our ring over shared memory, ranks of one host", connect_shm);
  b.one_host = true;
  return b;
}

RINGBENCH_REGISTER_BACKEND(shm, shm());

}  // namespace
}  // namespace ringbench
