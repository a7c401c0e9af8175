// What the α–β model says the hierarchical allreduce (`--hierarchical`, collectives/
// hierarchical_allreduce.h) costs, and gains over the flat ring, on a run's cluster of M nodes of
// R ranks. The flat ring of N = R·M consecutive ranks crosses each node's link once each way,
// carrying 2(N-1)/N of the buffer: t = 2(N-1)·α + 2(N-1)/N·B·β. The hierarchical allreduce runs
// three phases one after the other:
//   - a reduce-scatter among the node's R ranks over shared memory,
//   - R rings across the nodes, each carrying 2(M-1)/M of a share of B/R, side by side on the
//     same link: 2(M-1)·α + 2(M-1)/M·B·β, with α and β fitted on the run's flat ring points,
//   - an allgather among the node's R ranks.
// The two phases within the node together move what a ring allreduce of R ranks moves:
// 2(R-1)·α_node + 2(R-1)/R·B·β_node. A run measures that level only inside the hierarchical
// allreduce, so α_node and β_node are fitted on what the run's hierarchical points took beyond
// the level across the nodes; without such points the level is left out (free): an upper bound
// on the gain. (The level across uses the ring's terms at every size; the real one runs rd or
// direct for small shares.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runner/predict/cost_fit.h"
#include "runner/analysis/run.h"

namespace ringbench::predict {

struct TransportFit;
struct ModelCheck;

// The hierarchical allreduce's modelled time: the level across the nodes only (see above).
double hierarchical_seconds(const CostFit& flat, int nodes, double bytes);

// The hierarchical allreduce's cost on one transport over `nodes` nodes of `per_node` ranks.
struct HierCost {
  std::string transport;
  int nodes = 0, per_node = 0;
  CostFit across;                 // the flat ring's fit at N = nodes x per_node, priced at `nodes`
  std::optional<CostFit> within;  // the level within the node (ring terms at per_node); none: not measured
  double seconds(double bytes) const;  // both levels, or the one across alone
};

// The level within the node from the hierarchical allreduce's measured (bytes, seconds): what
// each size took beyond `across` at `nodes`, fitted with the ring's terms at `per_node`. None
// with fewer than two sizes that took longer than the level across alone.
std::optional<CostFit> fit_within(const CostFit& across, int nodes, int per_node,
                                  const std::vector<CostSample>& hier_times);

// One cost per (transport, nodes) whose flat ring the run measured at nodes x R ranks (R > 1),
// from the flat fits (model_check.h's, per N) and the run's hierarchical allreduce points.
std::vector<HierCost> hierarchical_costs(const report::Run& run, const std::vector<TransportFit>& fits);
const HierCost* find_cost(const std::vector<HierCost>& costs, const std::string& transport, int nodes);

struct HierRow {
  uint64_t bytes = 0;
  double flat_predicted_s = 0, hier_predicted_s = 0;  // the level across alone: an upper bound on the gain
  std::optional<double> hier_model_s;                 // both levels, where the level within was fitted
  double flat_busbw = 0, hier_busbw = 0;  // measured medians (GB/s); 0 where not measured
  double predicted_ratio() const { return flat_predicted_s / hier_predicted_s; }
  double measured_ratio() const { return flat_busbw > 0 ? hier_busbw / flat_busbw : 0; }
};

struct HierPrediction {
  HierCost cost;
  std::vector<HierRow> rows;
};

// One prediction per (transport, nodes) whose flat ring was measured, on a cluster of several
// ranks per node; empty otherwise.
std::vector<HierPrediction> predict_hierarchical(const report::Run& run, const std::vector<TransportFit>& fits);

// The section of `ringbench predict`'s output ("" when there is nothing to say).
std::string md_hierarchical(const std::vector<HierPrediction>& predictions);
// The train points of several ranks per node (model_check.h's rows): the flat ring's measured
// and predicted step, the step and img/s predicted with the hierarchical allreduce instead, and
// the predicted gain ("" when there are none).
std::string md_hierarchical_training(const ModelCheck& mc);

}  // namespace ringbench::predict
