// `train --data jpeg`: what the input pipeline did per measured step on each rank (time the step
// waited for its batch, images decoded, the pipeline threads' CPU time) and the images it
// skipped, gathered to rank 0 for the JSON ("input") and a summary line.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "collectives/store.h"
#include "input/pipeline.h"

namespace ringbench {

class InputMeter {
 public:
  // `pipeline` null: nothing to measure (synthetic or Fashion-MNIST data).
  explicit InputMeter(const input::Pipeline* pipeline);
  bool active() const { return pipeline_ != nullptr; }
  // After every step (warmup too): the pipeline's work since the step before, kept when measuring.
  void step_done(bool measuring, double step_s);
  // This rank's record: per-step series and its skipped images.
  nlohmann::json rank_json(int rank) const;
  // How the pipeline runs: the set, threads, batches ahead, crop size, steps per epoch.
  nlohmann::json config_json() const;

 private:
  const input::Pipeline* pipeline_;
  input::PipelineTotals last_;
  std::vector<double> stall_s_, cpu_s_, step_s_;
  std::vector<int64_t> images_;
};

// Every rank publishes its record; rank 0 reads and checks them all and returns the summary
// (null JSON on other ranks, and when the meter is not active).
nlohmann::json gather_input(Store& store, int rank, int n, const InputMeter& meter, size_t steps,
                            std::chrono::milliseconds timeout);
// The summary lines: input stall, images decoded per second, the pipeline's CPUs, skips named.
void print_input(const nlohmann::json& summary);

}  // namespace ringbench
