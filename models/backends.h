// Constructors of the individual backends, behind make_network() (network.h).
#pragma once

#include <memory>

#include "models/network.h"

namespace ringbench::models {

std::unique_ptr<Network> make_reference_network(const Graph& g, int batch);
std::unique_ptr<Network> make_onednn_network(const Graph& g, int batch);  // RINGBENCH_HAVE_DNNL

}  // namespace ringbench::models
