// Rank 0's results of a training run (train_cmd.cc): gathered from every rank through the store,
// checked, summarized and printed.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "models/trainer.h"
#include "runner/cli/vgpu_cmd.h"
#include "collectives/store.h"

namespace ringbench {

// Every rank's test-set result, summed over the ranks (every rank calls it: each publishes its own).
nlohmann::json gather_eval(models::Trainer& trainer, const models::Dataset& test_set, Store& store, int rank, int n,
                 std::chrono::milliseconds timeout);

// Every rank's measured steps and how many CPUs it kept busy, checked, as rank 0 reads them
// (every rank publishes its own).
std::vector<nlohmann::json> gather_steps(Store& store, int rank, int n,
                                        const std::vector<models::StepRecord>& measured, double cpus_busy, int batch,
                                        std::chrono::milliseconds timeout);

// Each rank's img/s, mean and 95% CI over its steps.
nlohmann::json per_rank_img_s(const std::vector<nlohmann::json>& ranks);

// The run's summary (rank 0): Horovod's img/sec per rank and in total, where a step's time goes,
// device memory, and the time-sliced device's share over the measured `window`.
nlohmann::json summarize(const std::vector<nlohmann::json>& ranks, const std::vector<models::StepRecord>& measured,
                         const VgpuSetup& vgpu, int64_t tail_steps,
                         std::pair<std::chrono::steady_clock::time_point, std::chrono::steady_clock::time_point> window);

// The step's timeline over the measured steps, as `ringbench predict` replays it: per gradient
// bucket (`bucket_list`: meta's buckets.list) its bytes, when the last rank had it final
// (seconds from the step's start), and its allreduce's time on the communication thread (mean
// over steps and ranks; empty with one rank). Each a mean over the measured steps.
nlohmann::json step_timeline(const std::vector<nlohmann::json>& ranks, const nlohmann::json& bucket_list);

// The Horovod-style result lines and where a step's time goes.
void print_summary(const nlohmann::json& summary, size_t steps, int n, const VgpuSetup& vgpu);

// The `# migration ...` line of a run's "migration" result (nothing when null).
void print_migration(const nlohmann::json& migration);

}  // namespace ringbench
