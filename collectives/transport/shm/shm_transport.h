// Shared-memory transport for ranks on one host. Every rank creates one POSIX shared-memory
// segment (shm_open, 0600, O_EXCL, a name with the job id and random bytes), publishes its name
// through the (authenticated) store, maps every peer's, and unlinks its own as soon as every rank
// has mapped it, so nothing stays in /dev/shm. A segment holds one lock-free single-producer/
// single-consumer byte ring per peer that sends to its rank; messages (a header with tag and
// length, then the payload) stream through it, in pieces when larger than the ring. Large
// messages can take one copy instead of two where the kernel allows it (single_copy_bytes).
// Progress: every wait() and test() moves all pending transfers of the transport, so waiting on
// one request never starves another. A waiter spins for `spin` (yielding the core), then sleeps
// on a futex in its own segment (the doorbell), which a peer rings after it published data or
// freed space while someone sleeps. A housekeeping thread bumps this rank's heartbeat every
// timeout/8 and checks the peers: an abort flag (with its reason), a peer that closed, a peer
// whose process is gone (kill(pid, 0), same pid namespace) or whose heartbeat stopped for
// longer than `timeout` fails every pending and later request with an IoError naming it.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "collectives/store.h"
#include "collectives/transport.h"

namespace ringbench {

struct ShmOptions {
  std::chrono::milliseconds timeout{30000};  // setup timeout and peer-silence limit
  // How long a waiting thread polls the rings (yielding the core) before it sleeps: waking a
  // sleeping thread costs tens of microseconds in a VM, more than a small message takes.
  std::chrono::microseconds spin{200};
  std::string job_id = "ringbench";  // in segment names; peers of another job are rejected
  // Bytes of each ring (one per directed pair of ranks); a power of two, 4 KiB .. 1 GiB. Every
  // rank must use the same. A rank's segment holds (size - 1) rings.
  size_t ring_bytes = size_t{1} << 20;
  // Messages of at least this many bytes go in one copy: the ring carries only their header, and
  // the receiver reads the payload straight out of the sender's buffer with process_vm_readv
  // (cross-memory attach), where the kernel lets it (probed per pair at setup; else the ring).
  // Such a send completes once the receiver has read it. 0 (the default): always the ring, which
  // measured faster on our 2-core VM (bench/shm_vs_tcp.cc --single-copy-bytes 65536): the
  // syscall, the page pinning and the acknowledgement cost more than the copy they save.
  size_t single_copy_bytes = 0;
  // The ring's reduce-scatter reduces each message straight out of the shared ring as it arrives
  // (irecv_sink), instead of copying it into a slot and reducing from there. false: the copy,
  // for comparison (bench/shm_vs_tcp.cc).
  bool reduce_in_ring = true;
  // With reduce_in_ring: the ring also sends each message on as it arrives, reduced or copied
  // straight into the next rank's ring (irecv_forward), instead of into its own buffer first and
  // copied from there (NCCL's recvReduceSend and recvCopySend). false: no forwards, for comparison.
  bool forward = true;
  std::string key_prefix = "shm";  // store namespace, for several transports on one store
};

// Connects to all peers through `store` (collective: every rank must call it). All ranks must
// run on this host, under one uid.
std::unique_ptr<Transport> make_shm_transport(Store& store, int rank, int size,
                                              const ShmOptions& opts);

}  // namespace ringbench
