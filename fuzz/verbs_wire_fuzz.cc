// libFuzzer: the address a verbs peer publishes through the store (collectives/transport/verbs/verbs_wire.cc),
// read as rank 0 of 2..5 ranks on RoCE and on InfiniBand (byte 0 chooses). Any bytes give a
// checked address or an IoError; an accepted one must hold the fields that were read.
#include <cstdint>
#include <cstring>
#include <string>

#include "base/errors.h"
#include "collectives/transport/verbs/verbs_wire.h"

namespace vw = ringbench::verbs_wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int world = 2 + data[0] % 4;
  const uint8_t link = (data[0] & 0x80) ? vw::kLinkInfiniband : vw::kLinkEthernet;
  const std::string blob(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const vw::PeerAddress a =
        vw::decode(blob, {.peer = 1, .rank = 0, .world_size = world, .job_id = "fuzz", .link_layer = link, .me = "rank 0"});
    vw::ConnInfo c{};
    std::memcpy(&c, blob.data(), sizeof c);
    if (a.psn != c.psn || a.mtu != c.mtu || a.lid != c.lid || std::memcmp(a.gid, c.gid, 16) != 0 ||
        a.data_qpn < 2 || a.ctrl_qpn < 2)
      __builtin_trap();
  } catch (const ringbench::IoError&) {
  }
  return 0;
}
