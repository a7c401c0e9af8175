#include "collectives/transport/verbs/verbs_wire.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "base/errors.h"

namespace ringbench::verbs_wire {
namespace {

// QP numbers and PSNs are 24-bit; QPs 0 and 1 are the subnet management and general services
// QPs, never a peer's RC QP.
constexpr uint32_t kMax24 = (1u << 24) - 1;
// InfiniBand unicast LIDs are 0x0001-0xBFFF.
constexpr uint16_t kMaxUnicastLid = 0xBFFF;

}  // namespace

std::string gid_string(const uint8_t gid[16]) {
  char b[INET6_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET6, gid, b, sizeof b);
  return b;
}

std::string encode(const ConnInfo& mine, const std::vector<uint32_t>& qpns) {
  std::string blob(reinterpret_cast<const char*>(&mine), sizeof mine);
  blob.append(reinterpret_cast<const char*>(qpns.data()), qpns.size() * sizeof(uint32_t));
  return blob;
}

PeerAddress decode(const std::string& blob, const Expected& e) {
  const std::string peer = "rank " + std::to_string(e.peer);
  auto bad = [&](const std::string& them, const std::string& what) {
    return IoError(e.peer, e.me + ": " + them + " published a bad verbs address: " + what);
  };
  ConnInfo ci{};
  if (blob.size() < sizeof ci)
    throw bad(peer, std::to_string(blob.size()) + " bytes, less than the " + std::to_string(sizeof ci) +
                        "-byte header");
  std::memcpy(&ci, blob.data(), sizeof ci);
  if (ci.magic != kMagic) throw bad(peer, "not a ringbench verbs address (magic)");
  const std::string them = peer + " (gid " + gid_string(ci.gid) + ")";
  if (ci.version != kProtocolVersion)
    throw IoError(e.peer, e.me + ": " + them + " speaks verbs protocol " + std::to_string(ci.version) +
                              ", this rank " + std::to_string(kProtocolVersion));
  if (std::memchr(ci.job_id, 0, sizeof ci.job_id) == nullptr) throw bad(them, "job id not terminated");
  if (e.job_id != ci.job_id)
    throw IoError(e.peer, e.me + ": " + them + " belongs to job '" + ci.job_id + "', not this job's '" +
                              e.job_id + "'");
  const size_t expected_size = sizeof ci + 2 * size_t(e.world_size) * sizeof(uint32_t);
  if (ci.world_size != uint32_t(e.world_size) || ci.rank != uint32_t(e.peer) || blob.size() != expected_size)
    throw IoError(e.peer, e.me + ": " + them + " thinks it is rank " + std::to_string(ci.rank) + " of " +
                              std::to_string(ci.world_size) + " (" + std::to_string(blob.size()) +
                              " bytes), this is rank " + std::to_string(e.rank) + " of " +
                              std::to_string(e.world_size) + " (" + std::to_string(expected_size) + " bytes)");
  if (ci.link_layer != e.link_layer)
    throw IoError(e.peer, e.me + ": " + them + " is on another link layer (RoCE vs InfiniBand)");
  if (ci.mtu < kMtu256 || ci.mtu > kMtu4096)
    throw bad(them, "MTU code " + std::to_string(ci.mtu) + " (1-5: 256 to 4096 bytes)");
  if (ci.psn > kMax24) throw bad(them, "PSN " + std::to_string(ci.psn) + " is not 24-bit");
  if (e.link_layer == kLinkInfiniband && (ci.lid == 0 || ci.lid > kMaxUnicastLid))
    throw bad(them, "LID " + std::to_string(ci.lid) + " is not a unicast LID");
  if (e.link_layer == kLinkEthernet && std::all_of(ci.gid, ci.gid + 16, [](uint8_t b) { return b == 0; }))
    throw bad(them, "a zero GID on RoCE");
  PeerAddress a;
  const char* mine = blob.data() + sizeof ci + 2 * size_t(e.rank) * sizeof(uint32_t);
  std::memcpy(&a.data_qpn, mine, sizeof a.data_qpn);
  std::memcpy(&a.ctrl_qpn, mine + sizeof a.data_qpn, sizeof a.ctrl_qpn);
  for (const auto& [name, qpn] : {std::pair{"data", a.data_qpn}, std::pair{"control", a.ctrl_qpn}})
    if (qpn < 2 || qpn > kMax24)
      throw bad(them, std::string(name) + " QP number " + std::to_string(qpn) + " for rank " +
                          std::to_string(e.rank) + " (2 to 2^24-1)");
  a.psn = ci.psn;
  a.mtu = ci.mtu;
  a.lid = ci.lid;
  std::memcpy(a.gid, ci.gid, 16);
  return a;
}

}  // namespace ringbench::verbs_wire
