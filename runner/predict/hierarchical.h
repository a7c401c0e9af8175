// What the α–β model says the hierarchical allreduce (`--hierarchical`, collectives/
// hierarchical_allreduce.h) costs, and gains over the flat ring, on a run's cluster of M nodes of
// R ranks. The flat ring of N = R·M consecutive ranks crosses each node's link once each way,
// carrying 2(N-1)/N of the buffer: t = 2(N-1)·α + 2(N-1)/N·B·β. The hierarchical allreduce runs
// three phases (one after the other on the whole buffer with --hier-chunk 0, else pipelined in
// chunks, below):
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
//
// Pipelined in chunks of C bytes (K = ceil(B/C) chunks), the levels overlap: chunk k crosses
// the nodes while chunk k+1 is reduce-scattered and chunk k-1 allgathered within the node. The
// model replays that schedule with each chunk's terms (the reduce-scatter and the allgather each
// half of the level within's), so a buffer costs about K·max(across(C), within(C)) plus one
// chunk's reduce-scatter (fill) and allgather (drain), and the level across pays its 2(M-1)·α
// once per chunk. It assumes the two levels do not slow each other down (the link and the
// node's memory and CPU apart: on an emulated cluster whose nodes share cores they do), and
// takes α_node and β_node from points that ran the levels one after the other (--hier-chunk 0),
// where the sum holds: for the pipelined points it is then a prediction, not a fit.
#pragma once

#include <cstdint>
#include <functional>
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
  size_t chunk_bytes = 0;         // pipelined in chunks of this many bytes; 0: the levels one after the other
  double seconds(double bytes) const;  // both levels (or the one across alone), in this cost's form
};

// The pipelined schedule (above) of `bytes` in chunks of `chunk` bytes, given one chunk's time
// across the nodes and within the node (reduce-scatter and allgather together).
double pipelined_seconds(double bytes, double chunk, const std::function<double(double)>& across,
                         const std::function<double(double)>& within);

// The pipeline chunk a point ran with (collectives: its records' meta.options.hier_chunk_bytes;
// train: its hier_chunk axis, where hierarchical); 0 for the levels one after the other and for
// records from before the pipeline.
size_t hier_chunk_of(const report::Point& p);

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
  // Measured medians (GB/s); 0 where not measured. hier: the pipelined point where the run has
  // one, else the one with the levels one after the other; serial: the latter, beside a pipelined one.
  double flat_busbw = 0, hier_busbw = 0, serial_busbw = 0;
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
