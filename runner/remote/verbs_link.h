// The device protocol over RDMA verbs: after the HMAC handshake and the link choice on the TCP
// connection (channel_wire.h), both ends bootstrap collectives' verbs transport over that
// authenticated connection (PairStore: its QP, GID and PSN exchange, checked field by field by
// verbs_wire::decode, and a barrier), so a peer that did not prove the job's secret never gets a
// queue pair; the requests then travel over the transport's RC queue pairs (TransportChannel).
// SEND/RECV only: no memory is open to remote access, so there are no rkeys to exchange.
#pragma once

#include <memory>
#include <string>

#include "runner/remote/transport_channel.h"

namespace ringbench::remote {

struct VerbsLinkOptions {
  std::string ib_dev;  // "" = the first device with an ACTIVE port
  int gid_index = -1;  // -1 = a RoCE v2 GID with an IPv4 address, else RoCE v1
};

// "" where this build and host can open a verbs link (on `ib_dev`, when named); else what is missing.
std::string verbs_link_unavailable(const std::string& ib_dev = "");

// The bootstrap over `fd` (connected and authenticated; not owned, it must outlive the channel)
// and the channel over the verbs transport. The server is rank 0. `timeout` bounds the bootstrap
// and is the transport's peer-silence limit. Throws Error for what is missing here (no device)
// and IoError naming `peer` for what the peer did or did not do.
std::unique_ptr<TransportChannel> open_verbs_channel(int fd, const std::string& peer, bool server, Millis timeout,
                                                     const VerbsLinkOptions& o);

}  // namespace ringbench::remote
