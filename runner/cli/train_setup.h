// `ringbench train`'s setup (runner/cli/train_setup.cc): what every rank checks and builds before
// its steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "input/pipeline.h"
#include "models/data.h"
#include "models/graph.h"
#include "models/network.h"
#include "models/trainer.h"
#include "runner/backends/backend.h"
#include "runner/cli/command.h"
#include "runner/cli/cpu_budget.h"
#include "runner/job/gpu.h"
#include "runner/cli/train_cmd.h"
#include "runner/cli/vgpu_cmd.h"
#include "runner/migrate/migration.h"

namespace ringbench {

// The options' own checks, before any rank starts; an Error names the option.
void validate_train_args(const TrainArgs& a);
// Refuses at once a model and batch this machine's memory cannot hold, naming the sizes.
void check_host_memory(const models::Graph& g, const TrainArgs& a);
// Where training computes (device and backend); what cannot run here fails now, saying why.
Placement place_training(const TrainArgs& a, const Backend& comm);
// The model, checked before any rank starts, so that a typo fails once, at once.
models::Graph build_graph(const TrainArgs& a);
// The options that shape the training: every rank must share them.
std::string train_shape(const TrainArgs& a, const models::Graph& graph, const Placement& where);

// --precision as the network takes it.
models::Precision train_precision(const TrainArgs& a);
// The type the gradients cross the network in: --compression's, or with auto the training
// precision's (bf16, fp16: AMP frameworks allreduce low-precision gradients), else fp32.
DType gradient_wire(const TrainArgs& a);
// " (auto: the training precision)" / " (--compression)": why the gradients are in that type.
std::string gradient_wire_why(const TrainArgs& a);

// Where this rank computes: its threads, its GPU (-1: none), and the network.
struct Compute {
  std::optional<CpuBudget> budget;  // --threads 0: what the machine has to spare
  int threads = 1;
  bool weight_grad_thread = false;  // weight gradients on a second thread (--weight-grad-thread)
  int gpu = -1;
  std::unique_ptr<models::Network> net;
};
// Sets up `c`, and `vgpu` from --profile (after the ranks' last barrier, the option check).
void set_up_compute(Compute& c, VgpuSetup& vgpu, const RankJob& job, const TrainArgs& a, const models::Graph& graph,
                    const Placement& where);

// The batches this rank trains on, and how many steps (warmup included).
struct TrainData {
  std::unique_ptr<models::BatchSource> source;
  models::Dataset train_set, test_set;  // Fashion-MNIST's (test_set: with --eval)
  const input::Pipeline* pipeline = nullptr;  // --data jpeg: the source's input pipeline
  int64_t total_steps = 0;
};
// Synthetic data, or this rank's shard of Fashion-MNIST.
void load_data(TrainData& d, const TrainArgs& a, const models::Graph& graph, int rank, int n);
// --loss-scale as the trainer takes it (auto: dynamic for fp16 only).
models::LossScaleOptions loss_scale_options(const TrainArgs& a);
models::TrainOptions train_options(const TrainArgs& a, const RankJob& job, const VgpuSetup& vgpu);

// --migrate-*: the migration this rank takes part in (as the moving rank, its target or another
// rank), or none.
std::unique_ptr<migrate::Migration> plan_migration(const TrainArgs& a, const RankJob& job, const models::Graph& graph,
                                                   const VgpuSetup& vgpu, int64_t total_steps, bool is_target,
                                                   const std::vector<std::string>& argv, migrate::RingHooks hooks);

}  // namespace ringbench
