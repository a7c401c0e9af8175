// `ringbench train`'s options (the command: cli/train_cmd.h). Here, beneath the commands, because
// the sweep axes (axes.cc) take train's defaults as theirs: a point at an axis's default runs
// what a sweep without the axis ran, and a record from before the axis holds that default.
#pragma once

#include <string>
#include <vector>

#include "runner/backends/backend.h"
#include "runner/migrate/migrate_args.h"

namespace ringbench {

// A training job's vGPU profile (cli/vgpu_cmd.h applies it).
struct VgpuTrainArgs {
  std::string profile = "none";  // a catalog profile, "passthrough", "bare-metal" or "none"
  bool allow_mismatch = false;
  std::string catalog;           // "": the built-in catalog
  std::string scheduler;         // socket of a `ringbench vgpu share` scheduler: time-slice this job
};

struct TrainArgs {
  std::string model = "lenet", backend = "auto", transport = kBaselineBackend, data = "synthetic";
  std::string device = "auto";       // cpu | cuda | auto (cuda when built with it and a GPU is here)
  std::string stage_piece = "4M";    // --device cuda over tcp/verbs/mpi: staging pipeline piece
  std::string conv_algo = "measure";  // cudnn: measure (cudnnFind) | heuristic
  std::string weight_grad_thread = "auto";  // auto | on | off (Network::set_weight_grad_thread)
  std::string precision = "fp32";    // fp32 | tf32 | bf16 | fp16 (models::Precision)
  std::string compression = "auto";  // auto | none | fp16 | bf16: the gradients' type on the wire
  std::string loss_scale = "auto";   // auto | none | dynamic[:INIT] (models::LossScaleOptions)
  std::string segment = "1M";        // our ring's largest segment when it reduces gradients
  std::string data_dir;
  int data_threads = 2, data_prefetch = 2;  // --data jpeg: the input pipeline's threads and batches ahead
  int batch = 32, steps = 20, warmup = 5, log_every = 10, epochs = 0;
  int classes = 0, image_size = 0, threads = 0, timeline_steps = 3;
  int layer_times = 0;  // extra steps after the measured ones, each layer timed
  bool aux_logits = false, no_overlap = false, eval = false;
  bool allow_damaged_data = false;  // --data jpeg: train on past missing shards and over 1% bad records
  double lr = 0.01, momentum = 0.9, weight_decay = 4e-5, fusion_mb = 25, first_bucket_mb = 1;
  uint64_t seed = 42;
  std::string json, timeline;
  std::string save_checkpoint;  // rank 0 writes the final parameters and state here
  double timeout_s = 60;
  int ranks = 1;
  std::string iface, addr;
  std::string secret_file;  // --secret-file: the job's secret, for ranks started by hand
  int sockets_per_peer = 2;
  // --autotune: the knobs above (fusion, first bucket, compression, segment) searched in the job
  // (runner/tune/autotune.h), then the measured steps run on the choice.
  bool autotune = false;
  std::string autotune_log;  // CSV, a row per sample (Horovod's HOROVOD_AUTOTUNE_LOG)
  int autotune_top_k = 3, autotune_repeats = 3, autotune_steps = 5;
  bool hierarchical = false;  // gradients allreduced in two levels: shm within each node, --transport across
  int ranks_per_node = 1;     // the nodes: consecutive ranks, this many each
  std::string hier_chunk = "4M";  // --hierarchical: the levels' pipeline chunk ("0": one after the other)
  VgpuTrainArgs vgpu;  // --profile, --allow-profile-mismatch, --vgpu-catalog, --vgpu-scheduler
  migrate::MigrateArgs migrate;  // --migrate-*: move a rank to another node during the run
};

}  // namespace ringbench
