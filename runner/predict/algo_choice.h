// The cost table `ringbench predict --algo-table FILE` writes: from the α-β fitted per
// (transport, N, algorithm) to a run's measured allreduces, the algorithm predicted fastest for
// every message size, as size ranges (runner/record/algo_table.h). Honest about what was
// measured: only an algorithm fitted at that N is a candidate, and at a size it is a candidate
// only within the sizes its fit measured, unless no algorithm was measured there; then the
// nearest measured ones (in log size) compete, and the range says so ("nearest measured").
#pragma once

#include <string>
#include <vector>

#include "runner/predict/model_check.h"
#include "runner/record/algo_table.h"

namespace ringbench::predict {

// One entry per (transport, N) with a fit of its own (fits over every N are not used).
AlgoTable choose_algorithms(const std::vector<TransportFit>& fits, const std::string& source);

// The table as markdown: per entry the ranges, and the algorithms not measured at that N.
std::string md_algo_table(const AlgoTable& t);

}  // namespace ringbench::predict
