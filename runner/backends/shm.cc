// Our ring over shared memory (collectives/transport/shm/): ranks of one host only. Ranks on
// other hosts, or in other network namespaces (the nodes of an emulated cluster share this
// host's /dev/shm), are refused before any segment is made: shared memory between them would
// bypass the network the run is meant to measure.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>

#include "base/bytes.h"
#include "base/errors.h"
#include "collectives/transport/shm/shm_transport.h"
#include "runner/backends/ring.h"
#include "runner/job/metadata.h"
#include "runner/job/world.h"

namespace ringbench {
namespace {

struct ShmArgs {
  std::string single_copy = "auto";  // messages of at least this size in one copy; "0": never; auto: see below
  std::string reduce = "forward";  // where the ring reduces: "forward", "ring" or "copy"
};
ShmArgs args;  // bound to the command line of whichever command runs

void add_options(CLI::App& cmd) {
  cmd.add_option("--shm-single-copy", args.single_copy, "shm: messages of at least this size go in one copy "
                 "(the receiver reads the sender's buffer with process_vm_readv where the kernel allows it); "
                 "0: always through the rings; auto: 0 for the flat ring, 64K for --hierarchical's level within "
                 "the node (whose ranks wait on each other message by message: one copy and one handoff per "
                 "message, not one per ring's worth)")->capture_default_str();
  cmd.add_option("--shm-reduce", args.reduce, "shm: forward (reduce or copy each message straight out of the "
                 "shared ring into the next rank's ring as it arrives), ring (reduce it out of the shared ring "
                 "into this rank's buffer, then send it from there) or copy (copy it into a slot first, then "
                 "reduce); ring and copy take one and two copies more, for comparison")
      ->capture_default_str()->check(CLI::IsMember({"forward", "ring", "copy"}));
}

// --shm-single-copy as a byte count: auto is 0 (never), but 64K for the hierarchical allreduce's
// level within a node.
size_t single_copy_bytes(bool node_level) {
  if (args.single_copy == "auto") return node_level ? size_t{64} << 10 : 0;
  return parse_bytes(args.single_copy);
}

void validate_options() {
  const size_t b = single_copy_bytes(false);
  if (b != 0 && b < 4096) throw Error("--shm-single-copy must be 0 (off) or at least 4K");
}

std::string inode_of(const char* path) {
  struct stat st {};
  if (::stat(path, &st) != 0) throw Error("--transport shm: cannot stat " + std::string(path) + ": " + std::strerror(errno));
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

// Where this rank runs, as far as shared memory cares: the kernel (its boot id), the network
// namespace (an emulated cluster's nodes differ only there), and the /dev/shm and IPC namespace
// that segments live in (containers of one host may have private ones).
std::string host_identity() {
  const std::string boot = read_first_line("/proc/sys/kernel/random/boot_id");
  if (boot.empty()) throw Error("--transport shm: cannot read /proc/sys/kernel/random/boot_id to tell this host");
  return "boot " + boot + " netns " + inode_of("/proc/self/ns/net") + " ipcns " + inode_of("/proc/self/ns/ipc") +
         " /dev/shm " + inode_of("/dev/shm");
}

std::unique_ptr<Transport> connect_shm(const BackendSetup& s) {
  check_same_options(s.store, s.key_prefix + "/shm_host", host_identity(), s.rank, s.size, s.timeout,
                     "run on one host, in one network namespace, for --transport shm (shared memory "
                     "connects only the ranks of one host; use tcp or verbs between hosts)");
  ShmOptions o;
  o.timeout = s.timeout;
  o.spin = s.net.spin;
  o.job_id = s.world.job_id;
  o.key_prefix = s.key_prefix + "/shm";
  o.single_copy_bytes = single_copy_bytes(s.node_level);
  o.reduce_in_ring = args.reduce != "copy";
  o.forward = args.reduce == "forward";
  return make_shm_transport(s.store, s.rank, s.size, o);
}

std::vector<OptionAsRun> options_as_run() {
  return {{"--shm-single-copy", "shm_single_copy_bytes", single_copy_bytes(false)},
          {"--shm-reduce", "shm_reduce", args.reduce}};
}

RINGBENCH_REGISTER_BACKEND(shm, ring_backend({.name = "shm",
                                              .order = 30,
                                              .help = "our ring over shared memory, ranks of one host",
                                              .connect = connect_shm,
                                              .options = {add_options, validate_options, options_as_run},
                                              .one_host = true}));

}  // namespace
}  // namespace ringbench
