#include "runner/cli/options.h"

#include <CLI/CLI.hpp>
#include <string>

#include "models/network.h"
#include "runner/backends/backend.h"
#include "runner/record/point.h"

namespace ringbench {

namespace {

// Where a command's ranks run and how they find each other: the same for allreduce and train.
template <class Args>
void add_rank_options(CLI::App& cmd, Args& a) {
  cmd.add_option("--ranks", a.ranks, "Without mpirun: run this many ranks on this machine over loopback")->capture_default_str();
  cmd.add_option("--iface", a.iface, "Network interface to use (its IPv4 address)");
  cmd.add_option("--addr", a.addr, "IPv4 address to bind and advertise");
  cmd.add_option("--secret-file", a.secret_file, "For ranks started by hand: a file (mode 600) holding the job's "
                 "secret in hex, the same on every rank (else RINGBENCH_SECRET; `openssl rand -hex 32` makes one)");
  cmd.add_option("--sockets-per-peer", a.sockets_per_peer, "TCP connections per peer")->capture_default_str();
  cmd.add_option("--ranks-per-node", a.ranks_per_node, "Ranks per node: the nodes are this many consecutive ranks "
                 "each (as mpirun maps by slot and sweeps with cluster.ranks_per_node place them)")
      ->capture_default_str();
  cmd.add_flag("--hierarchical", a.hierarchical, "Allreduce in two levels (Horovod's hierarchical allreduce): "
               "reduce-scatter within each node over shm, allreduce of each rank's share across the nodes over "
               "--transport (one ring per local rank), allgather within the node");
  cmd.add_option("--hier-chunk", a.hier_chunk, "--hierarchical: the chunk the levels are pipelined in (while one "
                 "chunk crosses the nodes, the next is reduce-scattered and the previous allgathered within the "
                 "node); 0 runs the three phases one after the other on the whole buffer")
      ->capture_default_str();
}

}  // namespace

// `train --migrate-*` (runner/migrate/migration.h).
void add_migrate_options(CLI::App& cmd, migrate::MigrateArgs& a) {
  cmd.add_option("--migrate-at", a.at_step, "Live-migrate a rank once this many steps (warmup included) are done: "
                 "its state and framebuffer go to a new process on --migrate-netns's node, the ring re-forms "
                 "around it (0: no migration)")->capture_default_str();
  cmd.add_option("--migrate-rank", a.rank, "The rank that moves (-1: the last)")->capture_default_str();
  cmd.add_option("--migrate-method", a.method, "precopy (copy while the rank trains on, round after round, then "
                 "stun and copy the rest) or stopcopy (stun, then copy everything)")->capture_default_str();
  cmd.add_option("--migrate-to", a.to, "Where the target comes from: local (a process the moving rank starts, here or "
                 "in --migrate-netns) or standby (a process started with the job on node B, with --migrate-standby: "
                 "under --ranks N the launcher starts it; in a sweep under mpirun, the sweep rank of the migrate "
                 "section's to_node)")->capture_default_str();
  cmd.add_flag("--migrate-standby", a.standby, "This process is the standby target of --migrate-to standby: it "
               "listens on its address, waits for the moving rank, and trains on in its place (or leaves if the "
               "rank stays)");
  cmd.add_option("--migrate-netns", a.netns, "Network namespace of the node the rank moves to (an emulated "
                 "cluster's node, e.g. ringbench-n3); default: this host");
  cmd.add_option("--migrate-cpus", a.cpus, "CPUs the target runs on, as taskset takes them (e.g. 2,3 or 2-3: an "
                 "emulated cluster's node B's); default: the moving rank's own");
  cmd.add_option("--framebuffer", a.framebuffer, "The moving rank's vGPU framebuffer (emulated in host memory "
                 "without a GPU), e.g. 4G; default: --profile's, else the size of the rank's state");
  cmd.add_option("--migrate-fault", a.fault, "Tests: make the migration fail half way (target-unreachable, "
                 "target-killed: the rank resumes on its node; source-killed: every rank fails naming it)");
}

void add_allreduce_options(CLI::App& cmd, AllreduceArgs& a) {
  cmd.add_option("-b,--minbytes", a.minbytes, "Smallest message size in bytes (K, M, G suffixes)")->capture_default_str();
  cmd.add_option("-e,--maxbytes", a.maxbytes, "Largest message size in bytes")->capture_default_str();
  cmd.add_option("-f,--stepfactor", a.factor, "Multiply the size by this between rows")->capture_default_str();
  cmd.add_option("-n,--iters", a.iters, "Timed iterations per size")->capture_default_str();
  cmd.add_option("-w,--warmup_iters", a.warmup, "Untimed iterations per size before timing")->capture_default_str();
  cmd.add_option("-c,--check", a.check, "Verify results exactly (1) or not (0)")->capture_default_str();
  std::string impls = "Implementation of the collective: ring (ours)";
  for (const Backend* b : backends())
    if (!b->ring) impls += ", " + b->name + " (" + b->help + ")";
  cmd.add_option("--impl", a.impl, impls)->capture_default_str();
  cmd.add_option("--transport", a.transport, "Transport of the ring: " + backend_names(is_ring))
      ->capture_default_str();
  cmd.add_option("-d,--dtype", a.dtype, "float, half or bfloat16")->capture_default_str();
  cmd.add_option("-o,--op", a.op, "sum or avg")->capture_default_str();
  cmd.add_option("--json", a.json, "Also write the results as JSON to this file");
  cmd.add_option("--timeout", a.timeout_s, "Seconds a peer may stay silent before it is declared dead; "
                 "any single wait is limited to twice this")->capture_default_str();
  add_rank_options(cmd, a);
  cmd.add_option("--socket-buffer", a.socket_buffer, "SO_SNDBUF/SO_RCVBUF size; 0 keeps kernel autotuning")->capture_default_str();
  cmd.add_option("--spin-us", a.spin_us, "Microseconds a waiting rank polls its socket before "
                 "sleeping")->capture_default_str();
  add_backend_options(cmd);
  cmd.add_option("--segment", a.segment, "Ring pipeline segment size (the largest; over shm with "
                 "--shm-reduce forward, a quarter of its ring: the path's forward_bytes)")->capture_default_str();
  cmd.add_option("--min-segment", a.min_segment, "Smallest ring segment when a chunk is cut into "
                 "4 segments (not with forwards)")->capture_default_str();
  cmd.add_option("--depth", a.depth, "Ring receives posted ahead")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd.add_option("--algo", a.algo, "Our allreduce: auto (with --algo-table, the table's choice per size; "
                 "without, the built-in rule: small messages rd for 2^k ranks, else direct; ring above), ring, direct (one-shot), rd (recursive doubling) or hd "
                 "(halving-doubling, Rabenseifner; any rank count)")
      ->capture_default_str();
  cmd.add_option("--direct-max", a.direct_max, "auto, built-in rule: largest message for the small-message "
                 "algorithms")->capture_default_str();
  cmd.add_option("--algo-table", a.algo_table, "auto: choose ring, hd, direct or rd per size from this cost table "
                 "(written by `ringbench predict RUN --algo-table FILE` from measured alpha-beta fits) instead of the "
                 "built-in rule; it must have an entry for this transport and rank count");
}

void add_train_options(CLI::App& cmd, TrainArgs& a) {
  cmd.add_option("--model", a.model, "lenet, mobilenet_v1 or inception_v3")->capture_default_str();
  cmd.add_option("--batch", a.batch, "Images per rank per step")->capture_default_str();
  cmd.add_option("--steps", a.steps, "Measured steps (after the warmup)")->capture_default_str();
  cmd.add_option("--warmup", a.warmup, "Steps run before measuring")->capture_default_str();
  cmd.add_option("--epochs", a.epochs, "Real data only: train this many epochs of each rank's shard "
                 "(warmup included; replaces --steps)")->capture_default_str();
  std::string transports = "Gradient allreduce:";
  for (const Backend* b : backends())
    transports += std::string(b == backends().front() ? " " : ", ") + b->name + " (" + b->help + ")";
  cmd.add_option("--transport", a.transport, transports)->capture_default_str();
  cmd.add_option("--device", a.device, "Where to compute: cpu, cuda (GPU local rank mod GPUs; "
                 "NCCL needs one per rank), auto (cuda when this build has it and a GPU is here) or "
                 "remote:HOST:PORT[,fraction=F][,transport=tcp|verbs] (a `ringbench device-server`; "
                 "docs/remote-gpu.md)")->capture_default_str();
  cmd.add_option("--backend", a.backend, "Compute backend: auto (cudnn on cuda, else onednn when "
                 "built), cudnn, onednn or reference (naive loops; slow, for checking)")->capture_default_str();
  cmd.add_option("--conv-algo", a.conv_algo, "cudnn: how each convolution's algorithms are chosen: measure "
                 "(time them all at setup, as PyTorch's cudnn.benchmark) or heuristic (cuDNN's first "
                 "guess; no setup cost)")->capture_default_str();
  cmd.add_option("--precision", a.precision, "Arithmetic of forward and backward: fp32, tf32 (cudnn, GPUs of compute "
                 "capability 8.0+), bf16 (onednn on a CPU with AVX512-BF16 or AMX; cudnn 8.0+: convolutions and fc "
                 "layers only) or fp16 (cudnn 7.0+: convolutions and fc layers only); master weights, gradients, "
                 "batch-norm statistics, loss and SGD stay fp32")
      ->capture_default_str()->check(CLI::IsMember(models::precision_names()));
  cmd.add_option("--compression", a.compression, "Gradients on the wire: none (fp32), fp16 or bf16 (cast per bucket "
                 "before the allreduce and back after, as Horovod's Compression.fp16), or auto (the training "
                 "precision's type with --precision bf16 or fp16, else none); our ring transports only")
      ->capture_default_str()->check(CLI::IsMember(kCompressionNames));
  cmd.add_option("--loss-scale", a.loss_scale, "Dynamic loss scaling by PyTorch GradScaler's rules (the loss "
                 "gradient times S; a step with inf/NaN averaged gradients is skipped on every rank and S halved; "
                 "S doubled after 2000 good steps): auto (dynamic with --precision fp16, else none), none, dynamic "
                 "(S from 65536) or dynamic:INIT (INIT a power of two)")->capture_default_str();
  cmd.add_option("--stage-piece", a.stage_piece, "--device cuda with a backend of host memory: gradients are "
                 "staged through host memory in pieces of this size, the copies overlapping the "
                 "allreduce (0: whole buckets)")->capture_default_str();
  cmd.add_option("--fusion-mb", a.fusion_mb, "Gradient bucket (tensor fusion) threshold in MiB; 0 "
                 "disables fusion")->capture_default_str();
  cmd.add_option("--first-bucket-mb", a.first_bucket_mb, "Threshold of the first bucket in MiB, "
                 "small so communication starts early")->capture_default_str();
  cmd.add_option("--segment", a.segment, "Our ring transports: the largest segment a gradient bucket's "
                 "chunks are pipelined in (4K to 1G)")->capture_default_str();
  cmd.add_flag("--autotune", a.autotune, "Choose --fusion-mb, --first-bucket-mb, --compression and --segment in the "
               "job, as Horovod's --autotune: probe, fit the ring's alpha and beta, rank the issue's grid of 72 "
               "settings by predicted step time, measure the best --autotune-top-k and the defaults alternately, "
               "then run the warmup and measured steps on the best measured (our ring transports; docs/tuning.md)");
  cmd.add_option("--autotune-log", a.autotune_log, "--autotune: CSV of its samples, one row each (settings, "
                 "predicted and measured img/s), rewritten by rank 0 after each (as HOROVOD_AUTOTUNE_LOG)");
  cmd.add_option("--autotune-top-k", a.autotune_top_k, "--autotune: settings measured besides the defaults, best "
                 "predicted first")->capture_default_str()->check(CLI::Range(1, 64));
  cmd.add_option("--autotune-repeats", a.autotune_repeats, "--autotune: alternating samples of each measured "
                 "setting")->capture_default_str()->check(CLI::Range(1, 100));
  cmd.add_option("--autotune-steps", a.autotune_steps, "--autotune: timed steps per sample (each after one "
                 "untimed step on the new setting), and the unfused probe's steps")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd.add_flag("--no-overlap", a.no_overlap, "Allreduce only after backward has finished (to see "
               "what overlap saves)");
  cmd.add_option("--lr", a.lr, "Learning rate for one rank; scaled by the number of ranks")->capture_default_str();
  cmd.add_option("--momentum", a.momentum, "SGD momentum")->capture_default_str();
  cmd.add_option("--weight-decay", a.weight_decay, "L2 weight decay on conv and fc weights")->capture_default_str();
  cmd.add_option("--seed", a.seed, "Seed of parameters, synthetic data, shuffling and dropout")->capture_default_str();
  cmd.add_option("--data", a.data, "synthetic (random images, for throughput), fashion-mnist or jpeg (an image "
                 "set in --data-dir: `ringbench data make`'s shards, or one subfolder of JPEGs per class)")
      ->capture_default_str();
  cmd.add_option("--data-dir", a.data_dir, "Where the Fashion-MNIST idx files are (default "
                 "/usr/share/datasets/fashion-mnist), or the JPEG image set");
  cmd.add_option("--data-threads", a.data_threads, "--data jpeg: threads decoding and augmenting images, beside the "
                 "compute threads")->capture_default_str()->check(CLI::Range(1, 256));
  cmd.add_option("--data-prefetch", a.data_prefetch, "--data jpeg: batches prepared ahead of the one training")
      ->capture_default_str()->check(CLI::Range(0, 64));
  cmd.add_flag("--allow-damaged-data", a.allow_damaged_data, "--data jpeg: train on although shards are missing or "
               "more than 1% of a rank's records cannot be read (they are skipped, and the output says so)");
  cmd.add_flag("--eval", a.eval, "Real data: report test-set accuracy at the end");
  cmd.add_option("--save-checkpoint", a.save_checkpoint, "Rank 0 writes the final parameters and batch-norm state "
                 "to this file (models/checkpoint.h's format), for infer --checkpoint");
  cmd.add_option("--classes", a.classes, "Number of classes (0: the model's default)")->capture_default_str();
  cmd.add_option("--image-size", a.image_size, "Input height and width (0: the model's default)")->capture_default_str();
  cmd.add_flag("--aux-logits", a.aux_logits, "inception_v3: train with the auxiliary head");
  cmd.add_option("--threads", a.threads, "Compute threads per rank (0: auto, the CPUs this rank may "
                 "use (affinity, cgroup quota) that other work is not keeping busy, split between this "
                 "machine's ranks)")->capture_default_str();
  cmd.add_option("--weight-grad-thread", a.weight_grad_thread, "CPU: weight gradients on a second thread, beside the "
                 "data gradients (auto: with --threads 0 when other work keeps some, not all, CPUs busy)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "on", "off"}));
  cmd.add_option("--log-every", a.log_every, "Print a line every this many steps (0: never)")->capture_default_str();
  cmd.add_option("--json", a.json, "Write the results and settings as JSON to this file");
  cmd.add_option("--timeline", a.timeline, "Write a Chrome trace (Perfetto) per rank to this file "
                 "(rank r's as FILE.rank<r>.json when there are several)");
  cmd.add_option("--timeline-steps", a.timeline_steps, "Measured steps recorded in the timeline")->capture_default_str();
  cmd.add_option("--layer-times", a.layer_times, "After the measured steps, run this many more with every layer "
                 "timed and print where a step's time goes, per kind of layer and the slowest layers (rank 0's; "
                 "not counted in img/sec: a GPU backend waits for each layer in them)")->capture_default_str();
  cmd.add_option("--timeout", a.timeout_s, "Seconds a peer may stay silent before it is declared dead")->capture_default_str();
  add_migrate_options(cmd, a.migrate);
  add_rank_options(cmd, a);
  add_backend_options(cmd);
  add_vgpu_train_options(cmd, a.vgpu);
}

void add_vgpu_train_options(CLI::App& cmd, VgpuTrainArgs& a) {
  cmd.add_option("--profile", a.profile, "vGPU profile this job runs on (T4-4C, P40-8Q, passthrough, "
                 "bare-metal; see `ringbench vgpu profiles`): checked against the GPU found here, and "
                 "where emulated its framebuffer caps the backend's memory")->capture_default_str();
  cmd.add_flag("--allow-profile-mismatch", a.allow_mismatch, "Run even when --profile is not the "
               "vGPU this VM has (the result is marked as a mismatch)");
  cmd.add_option("--vgpu-catalog", a.catalog, "vGPU profile catalog (YAML) instead of the built-in one");
  cmd.add_option("--vgpu-scheduler", a.scheduler, "Socket of an emulated vGPU scheduler (started by "
                 "`ringbench vgpu share`): this job's device work runs only in the slices it grants");
}

void add_vgpu_commands(CLI::App& vgpu_cmd, VgpuArgs& a) {
  vgpu_cmd.require_subcommand(1);
  vgpu_cmd.add_option("--vgpu-catalog", a.catalog, "vGPU profile catalog (YAML) instead of the built-in one");
  vgpu_cmd.add_subcommand("profiles", "List the vGPU profile catalog: GPU, profile, framebuffer, "
                          "vGPUs per GPU, series, and where the numbers come from")
      ->callback([&a] { a.action = "profiles"; });
  vgpu_cmd.add_subcommand("detect", "What GPU this machine has (NVML, else nvidia-smi -q) and which "
                          "vGPU profile, as JSON")
      ->callback([&a] { a.action = "detect"; });
  auto* share = vgpu_cmd.add_subcommand(
      "share",
      "k emulated VMs of one vGPU profile time-sliced on this machine's device by a scheduler policy; "
      "each VM is an independent `ringbench train` job (the arguments after --), or `ringbench infer` job "
      "(after -- infer).\n"
      "ringbench vgpu share --profile T4-4C --vms 4 --policy fixed_share -- --model mobilenet_v1 "
      "--batch 8 --image-size 96\n"
      "ringbench vgpu share --profile T4-8C --vms 2 --policy best_effort -- infer --model mobilenet_v1 "
      "--image-size 96 --max-batch 8 --scenarios offline,server --min-duration 2");
  share->add_option("--profile", a.profile, "vGPU profile of every VM (see `ringbench vgpu profiles`)")->required();
  share->add_option("--vms", a.vms, "VMs sharing the device (at most the profile's vGPUs per GPU)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  share->add_option("--policy", a.policy, "best_effort, equal_share or fixed_share")->capture_default_str();
  share->add_option("--slice-ms", a.slice_ms, "Time slice length in milliseconds")->capture_default_str();
  share->add_option("--timeout", a.timeout_s, "Seconds after which the VMs are killed")->capture_default_str();
  share->add_option("--json", a.json, "Write per-VM and device results as JSON to this file");
  share->add_option("--log-dir", a.log_dir, "Where each VM's output goes (default: a temporary "
                    "directory, removed when all went well)");
  share->callback([&a] { a.action = "share"; });
  share->add_option("train_args", a.train_args, "After --: every VM's `ringbench train` options, or `infer` and "
                    "its `ringbench infer` options")->required();
}

void add_doctor_options(CLI::App& cmd, DoctorArgs& a) {
  cmd.add_option("--json", a.json, "Also write the report as JSON to this file");
  cmd.add_option("--config", a.config, "A sweep config: every host must load it with the same hash");
  cmd.add_option("--iface", a.iface, "Network interface the ranks talk on (its IPv4 address)");
  cmd.add_option("--addr", a.addr, "IPv4 address to bind and advertise");
  cmd.add_option("--secret-file", a.secret_file, "For ranks started by hand: the job's secret (mode 600)");
  cmd.add_option("--timeout", a.timeout_s, "Seconds to wait for any host")->capture_default_str();
}

void add_sweep_options(CLI::App& cmd, SweepArgs& a) {
  cmd.add_option("config", a.config, "Sweep config (YAML), e.g. configs/quick.yaml");
  cmd.add_option("--resume", a.resume, "Continue the sweep in this results directory: run only the "
                 "points not done yet (failed points run again)");
  cmd.add_option("--out", a.out, "Results directory to create (default: RESULTS/<name>-<UTC time>)");
  cmd.add_option("--results", a.results, "Where run directories are created")->capture_default_str();
  cmd.add_flag("--dry-run", a.dry_run, "Validate the config and list the points, run nothing");
}

}  // namespace ringbench
