// `ringbench tune`'s model: every candidate setting of the tuning knobs (fusion_mb,
// first_bucket_mb, compression, segment) priced by predict's step simulator, from one rank's
// unfused timeline (--fusion-mb 0: a bucket per gradient tensor, each with the time backward
// released it) and the transport's fitted allreduce cost. The model ranks; measurement decides.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runner/predict/cost_fit.h"
#include "runner/predict/step_sim.h"
#include "runner/sweep/axis_lists.h"
#include "runner/record/point.h"
#include "runner/tune/cpu_term.h"

namespace ringbench::tune {

// The knobs the model prices, as sweep axis keys (the axes declared `tuned`). Other axes (precision, sockets_per_peer) keep
// their first listed value: the α-β model has no term for them.
const std::vector<std::string>& modelled_knobs();

// One allreduce of `wire_bytes` cut into segments of at most `segment_bytes`.
using AllreduceCost = std::function<double(double wire_bytes, double segment_bytes)>;

// The ring's cost at `nodes` from a fit measured at the ring's default segment (1M): that fit,
// plus α for each message a smaller segment adds (2(N-1)·ceil(B/(N·segment)) messages instead of
// 2(N-1)·ceil(B/(N·1M))). A larger segment is priced as the default: the fit folded the default's
// per-segment costs into β, so the model cannot say what fewer segments save, nor what the
// pipelining of small ones gains. Segments are for measurement to decide.
AllreduceCost ring_cost(const predict::CostFit& fit, int nodes);

// The buckets train forms from tensors released in this order (models/bucket_plan.cc's rule: a
// bucket closes once it holds `first_bytes` (the first) or `fusion_bytes`; 0 fuses nothing),
// each ready when its last tensor is.
std::vector<predict::BucketTiming> rebucket(const std::vector<predict::BucketTiming>& tensors, double first_bytes,
                                            double fusion_bytes);

struct Ranked {
  std::vector<std::string> axes;  // every sweep axis's value (PointCoords::axes)
  double step_s = 0, exposed_s = 0;
  double link_step_s = 0;   // the α-β simulator's step (the link's bound)
  double core_step_s = 0;   // compute + optimizer + cpu_charge_s (the core's bound; step_s is the larger)
  double cpu_charge_s = 0;  // the CPU term: the communication's CPU per step taken from compute
  double wire_bytes = 0;    // per step
  bool is_default = false;  // every knob at train's default
};

// Every combination of the modelled knobs' values in `space` (the train lists), and train's
// defaults, priced and sorted fastest first (ties: fewer knobs off their default first). Each
// step is the larger of the α-β simulator's and the core's (compute + optimizer + the CPU term's
// charge for the step's bytes on the wire; cpu_term.h); a term that does not compete charges 0.
std::vector<Ranked> rank_settings(const predict::StepTimeline& unfused, const AxisLists& space,
                                  const AllreduceCost& cost, const CpuTerm& cpu = {});

// The k settings to measure, and the defaults after them where they are not among those (the
// defaults are measured whether or not they rank high: the speed-up is over them). The k are the
// best ranked, except that settings predicted within `tie` of the best step count as ties, and
// among ties one with a fusion_mb not yet taken goes first: the bucket size acts through the
// number of messages, which the model prices by α alone, and α fits near 0 where the link is
// bandwidth-bound, so the model cannot tell bucket sizes apart that a measurement can.
constexpr double kTie = 0.02;  // about the model's median error (results/model-check-*)
std::vector<Ranked> candidates(const std::vector<Ranked>& ranked, int k, double tie = kTie);

// The issue's grid: fusion_mb {1, 4, 16, 64} x first_bucket_mb {0.25, 1, 4} x compression
// {none, fp16} x segment {256K, 1M, 4M}; every other axis at its default.
extern const char* const kIssueGrid;  // as train list entries: "fusion_mb: [1, 4, 16, 64], ..."
AxisLists issue_grid();

// The allreduce probe's largest size: the first of its sizes (4K x 4^k, at least 1M, at most 64M)
// that holds the largest model's whole gradient (the sum of its unfused timeline's buckets), the
// largest bucket any candidate can make; 64M where no timeline is known. Sizes above it would only
// cost probe time: at 1 Gbit/s the 64M row is about 7 s of LeNet's 23 s probe.
std::string probe_max_bytes(const std::vector<predict::StepTimeline>& unfused);

// "fusion_mb 4, first_bucket_mb 0.25, compression fp16, segment 256K" (the knobs only).
std::string setting_text(const std::vector<std::string>& axes);

}  // namespace ringbench::tune
