// The verbs transport's address exchange: what each rank publishes through the (authenticated)
// store so that its peers can connect their queue pairs to it, and the checks of a peer's copy
// before any of its fields reaches ibv_modify_qp. Internal to the collectives library, and
// free of ibverbs so that it is built and tested everywhere. Both ends are the same build:
// fields are in host order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringbench::verbs_wire {

inline constexpr uint32_t kMagic = 0x52425642;  // "RBVB"
inline constexpr uint32_t kProtocolVersion = 2;  // 2: sends wait for the receiver's credits
// ibv_port_attr::link_layer and ibv_mtu values (checked against verbs.h where it is included).
inline constexpr uint8_t kLinkInfiniband = 1, kLinkEthernet = 2;
inline constexpr uint32_t kMtu256 = 1, kMtu4096 = 5;

// Followed on the wire by `world_size` pairs of QP numbers: the publisher's data and control
// QP for each peer (zeros for itself).
struct ConnInfo {
  uint32_t magic, version, rank, world_size;
  uint32_t psn, mtu;  // ibv_mtu enum of the active MTU
  uint16_t lid;
  uint8_t link_layer, reserved;
  uint8_t gid[16];
  char job_id[64];
};

// What this rank needs of a peer's address to connect to it.
struct PeerAddress {
  uint32_t psn = 0, mtu = 0, data_qpn = 0, ctrl_qpn = 0;
  uint16_t lid = 0;
  uint8_t gid[16] = {};
};

std::string encode(const ConnInfo& mine, const std::vector<uint32_t>& qpns);

// What the reader expects of the address that `peer` published.
struct Expected {
  int peer = 0, rank = 0, world_size = 0;
  std::string job_id;
  uint8_t link_layer = 0;
  std::string me;  // "rank R": how errors name this rank
};

// Checks every field (length, magic and version, job, rank and world size, link layer, MTU,
// PSN, the two QP numbers meant for this rank, and the LID or GID the link layer routes by)
// and returns the peer's address; a bad one throws IoError naming the peer and the field.
PeerAddress decode(const std::string& blob, const Expected& e);

std::string gid_string(const uint8_t gid[16]);

}  // namespace ringbench::verbs_wire
