// The oneDNN CPU backend's extras beyond make_onednn_network() (backends.h): a profiler that
// times every operation of one training step on its own, so a benchmark can compare the sum of
// the primitives' times with the whole step and see what the framework around them costs.
#pragma once

#include <string>
#include <vector>

#include "models/graph.h"
#include "models/network.h"

namespace ringbench::models {

struct PrimitiveTime {
  std::string node;  // layer name; "(outputs)" for copying the output gradients in
  std::string what;  // e.g. "conv fwd jit:avx512_core", "reorder weights jit:uni", "bn stats (loop)"
  Phase phase = Phase::forward;
  double seconds = 0;          // executed alone, `reps` times in a row: median
  double in_step_seconds = 0;  // executed within `reps` whole training steps: median
};

// Builds the network for `g` at `batch` (parameters from init_params(g, 1, ...), a random
// input and random output gradients) and runs one training step (forward + backward) to warm
// up. Then it runs `reps` training steps timing each operation as it goes, and finally
// executes each operation `reps` times in a row on its own, with the memories the step uses.
// Returns every operation of a training step in execution order with both medians: the sum
// of `in_step_seconds` is the step without the framework around the primitives; the sum of
// `seconds` is what the primitives cost with warm caches. Host loops (dropout, running
// statistics) are included and say "(loop)" in `what`; the input gradient, which a training
// step does not compute, is not.
// precision: the network's (fp32 or bf16, as make_onednn_network()).
std::vector<PrimitiveTime> profile_onednn_primitives(const Graph& g, int batch, int reps,
                                                     Precision precision = Precision::fp32);

}  // namespace ringbench::models
