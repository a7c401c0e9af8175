// A model's step and scaling efficiency at any N: its one-rank timeline (compute measured alone)
// replayed with an allreduce priced by α and β, for the ring and for Rabenseifner's halving and
// doubling (hd: the ring's bytes in 2·log2 N messages instead of 2(N-1)).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runner/predict/step_sim.h"

namespace ringbench::predict {

// What prices one allreduce message and byte on a path: fitted from a run, or described.
struct LinkCost {
  std::string name;  // "tcp", "pvrdma", ...
  double alpha_s = 0, beta_s = 0;
};

struct CurvePoint {
  int nodes = 1;
  double ring_step_s = 0, ring_efficiency = 1;
  double hd_step_s = 0, hd_efficiency = 1;
  double latency_share = 0;  // of the ring's allreduce time, the α terms' share
};

// 1, 2, 4, ..., 1024.
std::vector<int> powers_of_two_nodes(int max_nodes = 1024);

// Efficiency (thr(N)/N)/thr(1) = step(1)/step(N): every rank keeps its batch.
std::vector<CurvePoint> scaling_curve(const StepTimeline& one_rank, const LinkCost& link,
                                      const std::vector<int>& nodes);

// The N above which the ring's latency terms outweigh its bandwidth terms over a step's buckets:
// sum of 2(N-1)·α > sum of 2(N-1)/N·B·β, i.e. N > Σ B·β / (buckets·α). Null when α is 0.
std::optional<double> latency_dominates_above(const StepTimeline& one_rank, const LinkCost& link);

// The smallest N of the curve from which hd's step is at least `margin` shorter than the ring's.
std::optional<int> hd_wins_from(const std::vector<CurvePoint>& curve, double margin = 0.05);

}  // namespace ringbench::predict
