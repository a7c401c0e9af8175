// What the α–β model says the hierarchical allreduce (`--hierarchical`, collectives/
// hierarchical_allreduce.h) gains over the flat ring on a run's cluster of M nodes of R ranks.
// The flat ring of N = R·M consecutive ranks crosses each node's link once each way, carrying
// 2(N-1)/N of the buffer: t = 2(N-1)·α + 2(N-1)/N·B·β. The hierarchical allreduce's R rings
// across the nodes each carry 2(M-1)/M of a share of B/R, side by side on the same link:
// t = 2(M-1)·α + 2(M-1)/M·B·β, with α and β fitted on the run's flat ring points. The level
// within the node (shared memory, 2(R-1)/R·B copied and reduced) is not in the model: the run
// has no measurement of it, so the prediction is the gain if that level were free, an upper bound.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runner/predict/cost_fit.h"
#include "runner/analysis/run.h"

namespace ringbench::predict {

struct HierRow {
  uint64_t bytes = 0;
  double flat_predicted_s = 0, hier_predicted_s = 0;
  double flat_busbw = 0, hier_busbw = 0;  // measured medians (GB/s); 0 where not measured
  double predicted_ratio() const { return flat_predicted_s / hier_predicted_s; }
  double measured_ratio() const { return flat_busbw > 0 ? hier_busbw / flat_busbw : 0; }
};

struct HierPrediction {
  std::string transport;
  int nodes = 0, per_node = 0;
  CostFit flat;  // fitted on the flat ring's points at N = nodes x per_node ranks
  std::vector<HierRow> rows;
};

// The hierarchical allreduce's modelled time: the level across the nodes only (see above).
double hierarchical_seconds(const CostFit& flat, int nodes, double bytes);

// One prediction per (transport, nodes) whose flat ring was measured, on a cluster of several
// ranks per node; empty otherwise.
std::vector<HierPrediction> predict_hierarchical(const report::Run& run);

// The section of `ringbench predict`'s output ("" when there is nothing to say).
std::string md_hierarchical(const std::vector<HierPrediction>& predictions);

}  // namespace ringbench::predict
