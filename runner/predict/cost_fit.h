// The allreduce's cost, fitted from measured collectives points: the α–β model of Hockney, with
// each algorithm's message and byte counts (Thakur, Rabenseifner and Gropp, "Optimization of
// Collective Communication Operations in MPICH", 2005):
//   ring      2(N-1) messages per rank, 2(N-1)/N of the buffer sent: t = 2(N-1)·α + 2(N-1)/N·B·β
//   direct    one round, N-1 copies of the buffer sent:               t = α + (N-1)·B·β
//   rd        log2 N rounds, the whole buffer each:                    t = log2 N·(α + B·β)
//   hd        Rabenseifner's recursive halving and doubling (`--algo hd`; the extrapolation's
//             alternative to the ring): 2·log2 N messages, the ring's bytes:
//                                                                      t = 2·log2 N·α + 2(N-1)/N·B·β
// The ring's reduction costs (N-1)/N·B·γ: a fixed half of its byte term at every N, so no fit
// can tell γ from β; β here includes it.
#pragma once

#include <string>
#include <vector>

namespace ringbench::predict {

struct CostSample {
  int nodes = 0;
  double bytes = 0, seconds = 0;  // one size's time (median over repeats)
};

struct Residual {
  int nodes = 0;
  double bytes = 0, measured_s = 0, fitted_s = 0;
  double error() const { return fitted_s / measured_s - 1; }  // relative
};

struct CostFit {
  std::string algo;      // "ring", "direct" or "rd"
  double alpha_s = 0;    // per message (latency)
  double beta_s = 0;     // per byte sent (inverse bandwidth, with the ring's reduction)
  double r2 = 0;         // of the times, unweighted
  std::vector<Residual> residuals;
  double min_bytes = 0, max_bytes = 0;  // the sizes it was fitted on
  double seconds(int nodes, double bytes) const;  // the model's time
  double median_abs_error() const;
  double max_abs_error() const;
};

// The algorithm's (message, byte) multipliers at N ranks: t = m·α + b·B·β. Error for an unknown
// algorithm.
struct Terms {
  double messages = 0, bytes = 0;
};
Terms terms(const std::string& algo, int nodes);
bool has_cost_model(const std::string& algo);  // ring, direct, rd, hd (not the baselines: mpi, nccl)

// Weighted least squares on relative error (each size counts alike, 4 KiB as 16 MiB), with
// α, β >= 0 (a negative one is fixed at 0 and the other refitted). Error with fewer than two
// samples or fewer than two distinct (messages, bytes) designs.
CostFit fit_cost(const std::string& algo, const std::vector<CostSample>& samples);

}  // namespace ringbench::predict
