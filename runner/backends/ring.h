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

// A Backend of our ring over the transport `name`; the caller fills in what is its own
// (availability, options) before registering it.
Backend ring_backend(const std::string& name, int order, const std::string& help, TransportMaker connect);

}  // namespace ringbench
