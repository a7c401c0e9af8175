// The transports our ring runs over, chosen with `--transport` in `ringbench allreduce` and
// `ringbench train` (same options, same meaning in both): tcp, and verbs where this build has
// it (RINGBENCH_WITH_VERBS) and the host has an RDMA device.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "collectives/store.h"
#include "collectives/tcp_transport.h"
#include "collectives/transport.h"

namespace ringbench {

struct VerbsArgs {
  std::string ib_dev;       // "" = the first device with an ACTIVE port
  int ib_port = 0;          // 0 = auto
  int gid_index = -1;       // -1 = auto (RoCE v2 with an IPv4-mapped address, else v1)
  std::string mr_chunk = "1G";
};

void add_verbs_options(CLI::App& cmd, VerbsArgs& v);
// Throws Error when `transport` is verbs and this build lacks it, or the verbs options are
// out of range. Other transports are the caller's to check.
void validate_verbs_args(const std::string& transport, const VerbsArgs& v);
// Builds the ring's transport `name` ("tcp" or "verbs"); timeout, spin and job id are taken
// from `tcp` for both.
std::unique_ptr<Transport> make_ring_transport(const std::string& name, Store& store, int rank,
                                               int size, const TcpOptions& tcp,
                                               const VerbsArgs& v);

}  // namespace ringbench
