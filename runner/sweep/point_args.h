// The `ringbench` command line of one sweep point, built from the config alone: the sweep's
// rank 0 and, under mpirun, every sweep rank build it themselves from the config they loaded
// (nothing of it comes over the network).
#pragma once

#include <string>
#include <vector>

#include "runner/sweep/sweep_config.h"

namespace ringbench {

// The `ringbench` arguments of point `p`; its rank 0 writes its JSON to `json_path`, and a share
// point's VMs log beside `log_base`.
std::vector<std::string> point_args(const SweepConfig& c, const SweepPoint& p, const std::string& json_path,
                                    const std::string& log_base);

}  // namespace ringbench
