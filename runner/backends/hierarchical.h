// `--hierarchical`: our ring's allreduce in two levels (collectives/hierarchical_allreduce.h).
// Each node's ranks connect over our one-host ring transport (shared memory), and the ranks with
// the same local rank connect across the nodes over the chosen transport (tcp, verbs). Nodes are
// `--ranks-per-node` consecutive ranks, as mpirun's by-slot mapping and the sweeps place them.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "runner/backends/backend.h"

namespace ringbench {

using ConnectTransport = std::function<std::unique_ptr<Transport>(const BackendSetup&)>;

// This rank's communicator of two levels; `inter` names the transport across the nodes.
std::unique_ptr<Communicator> make_hierarchical(const BackendSetup& s, const std::string& inter,
                                                const ConnectTransport& connect);

// Why --hierarchical cannot run `ranks` ranks of `ranks_per_node` per node across `inter`
// ("" when it can): a clear reason naming the option at fault.
std::string hierarchical_unfit(int ranks, int ranks_per_node, const Backend& inter);

}  // namespace ringbench
