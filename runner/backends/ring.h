// Our ring allreduce (and, for small messages, its one-shot and recursive-doubling siblings)
// over any Transport: one backend per transport, each made with ring_backend() in the
// transport's own file, which says only how to connect it.
#pragma once

#include <functional>
#include <memory>

#include "collectives/transport.h"
#include "runner/backends/backend.h"

namespace ringbench {

using TransportMaker = std::function<std::unique_ptr<Transport>(const BackendSetup&)>;

// What a transport's file says of its ring backend; the rest is the same for every transport.
struct RingBackendSpec {
  std::string name;  // the transport: --transport <name>
  int order = 0;
  std::string help;
  TransportMaker connect;
  BackendOptions options = {};                      // its own options, or none
  std::function<std::string()> unavailable = {};    // empty: always available
  bool one_host = false;                            // connects only ranks of one host
};

// The Backend of our ring over a transport, to register (RINGBENCH_REGISTER_BACKEND).
Backend ring_backend(RingBackendSpec spec);

}  // namespace ringbench
