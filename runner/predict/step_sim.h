// One data-parallel training step, replayed: backward releases each gradient bucket at its
// measured time, one communication channel allreduces the buckets in order (as the trainer's
// communication thread does), and the optimizer updates bucket by bucket, each as soon as both
// backward has ended and that bucket is reduced (models/trainer.cc).
#pragma once

#include <functional>
#include <vector>

namespace ringbench::predict {

struct BucketTiming {
  double bytes = 0;
  double ready_s = 0;  // when every rank has it final, from the step's start
};

struct StepTimeline {
  double compute_s = 0;    // forward + backward: when backward ends, from the step's start
  double optimizer_s = 0;  // the whole update, shared among the buckets by their bytes
  std::vector<BucketTiming> buckets;  // in the order backward releases them
};

struct StepPrediction {
  double step_s = 0;
  double comm_end_s = 0;  // when the last bucket is reduced (0 without buckets)
  double exposed_s = 0;   // time the optimizer waited for reductions after backward ended
};

// overlap false: no bucket starts before backward ends (the trainer's --no-overlap).
StepPrediction simulate_step(const StepTimeline& t, const std::function<double(double bytes)>& allreduce_s,
                             bool overlap = true);

}  // namespace ringbench::predict
