// RDMA verbs transport (libibverbs, RC queue pairs), compiled only when RINGBENCH_HAVE_VERBS.
//
// Each pair of ranks is joined by two RC QPs: a data QP and a small control QP, all on one CQ
// with one completion channel.
//   - Data: isend is an IBV_WR_SEND_WITH_IMM, irecv posts a receive for (buffer, offset, len);
//     RC delivers in order, so the n-th send to a peer lands in the n-th receive posted for
//     it (the transport contract's in-order matching, with no copy and no rendezvous). The
//     immediate carries a 32-bit hash of the tag, which the receiver checks together with the
//     length. Receives may be posted late: a send waits in software until the peer has
//     posted its receive (credits below), because a send that reaches no receive is NAKed
//     "receiver not ready" and RC then sends it and everything queued behind it again. The
//     HCA still retries such a send forever (RNR retry = 7) should one happen. Nothing is
//     ever sent inline (PVRDMA allows none).
//   - Control: credits (how many receives a rank has posted for its peer, sent as they are
//     posted, coalesced when the control slots are busy), heartbeats every timeout/8 (at most
//     1 s), abort with its reason, goodbye.
//     Always-posted receive slots, so control never waits for the application.
// Failure detection: a killed peer's QPs are gone, so our next send to it (a heartbeat at
// the latest) is refused or exhausts the RC retries (the ACK timeout is derived from
// `timeout`); a stopped or hung peer still ACKs (the HCA/kernel answers for it), but stops
// sending heartbeats, and is declared dead after `timeout` of silence (2x when its NIC has
// not acknowledged anything lately either: then the path is slow, e.g. a software NIC on a
// starved host, and the RC retries decide). Either way every rank fails within 1-2x the
// timeout, naming the peer by rank, GID and QPN.
// Memory is registered once per Buffer, split into MRs of at most mr_chunk_bytes (PVRDMA
// limits an MR to 1 GiB); a transfer spanning several MRs uses one SGE per MR.
// Completions: a waiting thread polls the CQ for `spin`, then sleeps; a progress thread
// sleeps on the completion channel (and wakes every heartbeat interval), so an idle rank
// burns no core.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "collectives/store.h"
#include "collectives/transport.h"

namespace ringbench {

struct VerbsOptions {
  std::string device;   // --ib-dev; "" = the first device with an ACTIVE port
  int port = 0;         // --ib-port; 0 = the first ACTIVE port
  int gid_index = -1;   // --gid-index; -1 = RoCE v2 with an IPv4-mapped address, else v1
  std::chrono::milliseconds timeout{30000};  // connect timeout and peer-silence limit
  std::chrono::microseconds spin{200};       // CQ polling before a waiter sleeps
  size_t mr_chunk_bytes = size_t{1} << 30;   // --mr-chunk; PVRDMA's per-MR limit
  std::string job_id = "ringbench";          // peers of another job are rejected
  std::string key_prefix = "verbs";          // store namespace
};

// Connects to all peers through `store` (collective: every rank must call it). Throws Error
// at once when the host has no RDMA device (or not the one asked for).
std::unique_ptr<Transport> make_verbs_transport(Store& store, int rank, int size,
                                                const VerbsOptions& opts);

// Names of the RDMA devices on this host (ibv_get_device_list), empty when there are none.
std::vector<std::string> verbs_device_names();

// One port of one RDMA device as `ringbench doctor` reports it.
struct RdmaPort {
  struct Gid {
    int index = 0;
    std::string gid, type, netdev;  // type: "RoCE v2", "RoCE v1" or "IB"
  };
  std::string device, provider;
  int port = 0;
  std::string state, link_layer;  // "PORT_ACTIVE", "Ethernet" ...
  int active_mtu = 0;             // bytes
  std::vector<Gid> gids;          // non-empty entries of the GID table
  int gid_index = -1;             // what the transport would use with --gid-index -1
  std::string error;              // why the port could not be read (then the rest is partial)
};
// Every port of every RDMA device on this host.
std::vector<RdmaPort> rdma_inventory();

}  // namespace ringbench
