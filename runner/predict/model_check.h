// "Model check": every measured train point of a run against the step the model predicts for
// it, from the run's own allreduce measurements (cost_fit.h) and the point's own measured
// timeline (step_sim.h). What is checked is the communication model: compute, bucket release
// times and the optimizer are the point's measured ones.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runner/predict/cost_fit.h"
#include "runner/predict/hierarchical.h"
#include "runner/predict/step_sim.h"
#include "runner/analysis/run.h"

namespace ringbench::predict {

// The allreduce's cost on one transport: fitted at one N (ranks), or over every N measured (nodes 0).
struct TransportFit {
  std::string transport;
  int nodes = 0;
  CostFit fit;
};

// A train point of N >= 2 ranks (one rank has nothing to predict: its step is its compute and
// optimizer).
struct CheckRow {
  const report::Point* point = nullptr;
  int repeats = 0;
  double measured_s = 0, predicted_s = 0;  // step time, mean over the ok repeats
  double measured_exposed_s = 0, predicted_exposed_s = 0;
  std::optional<double> in_situ_ratio;  // the buckets' measured allreduce time / the fit's
  // The same prediction from the one-node point's timeline (same model and batch): compute as
  // one rank alone measured it, so the gap to predicted_s is what N ranks did to compute.
  std::optional<double> predicted_from_one_node_s;
  std::string fit;                      // which fit: "tcp N=2", "tcp N=2,4", "tcp hier 4x2", "" for one rank
  // Several ranks per node: the point's ranks (nodes x ranks per node), whether it ran the
  // hierarchical allreduce (train --hierarchical: priced with the hierarchical cost), and for a
  // flat one, the step the model predicts with the hierarchical allreduce instead.
  int ranks = 0;
  bool hierarchical = false;
  std::optional<double> predicted_hier_s;
  std::string hier_fit;  // the cost predicted_hier_s comes from: "tcp hier 4x2"
  double error() const { return predicted_s / measured_s - 1; }
};

struct ModelCheck {
  std::vector<TransportFit> fits;  // per (transport, N) and per transport over every N
  std::vector<HierCost> hier;      // several ranks per node: the hierarchical allreduce's, per (transport, nodes)
  std::vector<CheckRow> rows;
  std::vector<std::string> unchecked;  // train points that could not be checked, and why
  double median_abs_error() const;
  double max_abs_error() const;
};

// Buckets up to this size go to the small-message algorithms when the run measured them
// (collectives/allreduce.h's default direct_max_bytes).
constexpr double kSmallMessageBytes = 32 << 10;

// The rows point into `run`: it must outlive the check.
ModelCheck check_model(const report::Run& run);

// One repeat's measured step timeline (train's summary.timeline), or why there is none.
std::optional<StepTimeline> timeline_of(const report::Record& r, std::string& why);

// The fit that prices a bucket of `bytes` on (transport, N ranks): that N's own, else the one
// over every N; null when the run has none.
const TransportFit* fit_for(const std::vector<TransportFit>& fits, const std::string& transport, int ranks,
                            double bytes);

}  // namespace ringbench::predict
