// `train --autotune`: `ringbench tune`'s model-guided search inside one training job, as
// Horovod's --autotune searches inside its job. Every rank runs the same steps:
//   1. probe: one warm-up and `steps` steps with nothing fused (a bucket per tensor, each with the
//      time backward released it), and one ring allreduce size sweep on the job's own ranks;
//   2. fit α and β (predict's fit) and the CPU term (cpu_term.h), rank every setting of the space
//      as `ringbench tune` does (rank_settings);
//   3. the k best predicted and the job's defaults, alternating (repeats outermost), each sample
//      one warm-up step after the switch and `steps` timed steps;
//   4. the best measured median wins, and the job trains on with it.
// Every rank decides the same: each measurement is shared with every rank (the slowest rank's
// time counts, as the ring waits for it), and each rank computes the same choice from them.
// The probe and the samples are training steps: the model learns through them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/trainer.h"
#include "runner/predict/cost_fit.h"
#include "runner/sweep/axis_lists.h"
#include "runner/tune/tune_model.h"

namespace ringbench::tune {

struct AutotuneOptions {
  int top_k = 3;    // settings measured besides the defaults, best predicted first
  int repeats = 3;  // alternating samples of each
  int steps = 5;    // timed steps per sample (Horovod's HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE); the probe's too
  std::string log;  // CSV, one row per sample (HOROVOD_AUTOTUNE_LOG), rewritten by rank 0 after each
};

struct AllreduceTiming {
  double seconds = 0, cpu_s = 0;
};

// What the training job lends the search. Every call is collective: each rank makes the same
// calls in the same order.
struct AutotuneJob {
  int rank = 0, nodes = 2, batch = 0;
  double gradient_bytes = 0;  // fp32 bytes of every gradient: the largest bucket a setting can make
  // Switches the job to a setting: every sweep axis's value (PointCoords::axes order).
  std::function<void(const std::vector<std::string>& axes)> apply;
  // The current plan's buckets' fp32 bytes, in the order backward releases them.
  std::function<std::vector<double>()> bucket_bytes;
  std::function<models::StepRecord()> step;  // one training step
  // Ring allreduces of `bytes` of fp32 at the ring's default segment: the median seconds of a
  // few after a warm-up, and this process's CPU seconds per allreduce over them.
  std::function<AllreduceTiming(size_t bytes)> allreduce;
  // This rank's host, CPUs and compute threads, and the transport's communication threads per
  // rank: the CPU term's node (cpu_term.h). Its CPU per byte is fitted from the probe.
  RankCpus cpus;
  int comm_threads_per_rank = 2;
  // Every rank's `mine`, in rank order, on every rank; `key` is unique per call.
  std::function<std::vector<nlohmann::json>(const std::string& key, const nlohmann::json& mine)> share;
  std::function<void(const std::string& line)> say;  // a progress line (rank 0 prints it)
};

struct AutotuneSample {
  int trial = 0, repeat = 0;  // trial: the candidate's place in the predicted ranking's order
  std::vector<std::string> axes;
  bool is_default = false;
  double predicted_img_s = 0, measured_img_s = 0, seconds = 0;
};

struct AutotuneResult {
  std::vector<std::string> chosen, defaults;  // axes
  std::vector<AutotuneSample> samples;
  predict::CostFit fit;
  CpuTerm cpu;        // the CPU term the ranking charged (tune's, from this job's probe)
  size_t ranked = 0;  // settings the model priced
  int steps = 0;      // training steps the search took (probe and samples)
  double probe_s = 0, wall_s = 0;
  double median_img_s(const std::vector<std::string>& axes) const;
  double predicted_img_s(const std::vector<std::string>& axes) const;
  nlohmann::json to_json() const;
  std::string csv() const;  // the log: a header and a row per sample
};

// `start`: every axis's value as the job was started (the knobs not searched keep theirs).
AutotuneResult autotune(const AutotuneJob& job, const AutotuneOptions& o, const AxisLists& space,
                        const std::vector<std::string>& start);

// The probe's allreduce sizes: 4K, 16K, ... up to the first at or above `gradient_bytes` (at least 1M).
std::vector<size_t> probe_sizes(double gradient_bytes);

}  // namespace ringbench::tune
