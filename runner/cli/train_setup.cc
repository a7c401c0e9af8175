// `ringbench train`'s setup: the checks before any rank starts, where a rank computes, its data,
// its trainer's options and its part in a migration.
#include "runner/cli/train_setup.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "base/bytes.h"
#include "base/device_memory.h"
#include "base/errors.h"
#include "base/input_file.h"
#include "base/output_file.h"
#include "input/image_set.h"
#include "models/jpeg_source.h"
#include "models/zoo.h"
#include "runner/backends/hierarchical.h"
#include "runner/cli/train_autotune.h"
#include "runner/job/gpu.h"
#include "runner/job/metadata.h"
#include "runner/job/slurm.h"
#include "runner/job/world.h"
#include "runner/remote/remote_network.h"
#include "runner/record/point.h"
#include "runner/record/yaml_reader.h"

namespace ringbench {
namespace {

namespace m = ringbench::models;

int ranks_on_this_host(const World& w) {
  if (const char* s = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) return std::max(1, std::atoi(s));
  if (w.launcher == "slurm") return slurm_tasks_on_this_node();
  if (w.launcher == "local" || w.launcher == "env") return w.size;  // all on this machine
  return 1;
}

}  // namespace

void validate_train_args(const TrainArgs& a) {
  if (a.batch < 1) throw Error("--batch must be >= 1");
  if (a.steps < 1 && a.epochs < 1) throw Error("--steps must be >= 1");
  if (a.warmup < 0) throw Error("--warmup must be >= 0");
  if (a.layer_times < 0) throw Error("--layer-times must be >= 0");
  if (a.epochs < 0) throw Error("--epochs must be >= 0");
  if (a.fusion_mb < 0 || a.first_bucket_mb < 0) throw Error("--fusion-mb and --first-bucket-mb must be >= 0");
  backend_for("--transport", a.transport, any_backend);
  if (remote::is_remote_device(a.device)) remote::parse_device_spec(a.device);
  else if (a.device != "cpu" && a.device != "cuda" && a.device != "auto")
    throw Error("--device " + a.device + " is not known: use cpu, cuda or auto, or "
                "remote:HOST:PORT[,fraction=F][,transport=tcp|verbs]");
  parse_bytes(a.stage_piece);
  if (const size_t s = parse_bytes(a.segment); s < 4096 || s > (size_t(1) << 30))
    throw Error("--segment " + a.segment + " must be from 4K to 1G");
  validate_autotune_args(a);
  if (a.conv_algo != "measure" && a.conv_algo != "heuristic")
    throw Error("--conv-algo " + a.conv_algo + " is not known: use measure or heuristic");
  validate_backend_options();
  if (std::find(kDataNames.begin(), kDataNames.end(), a.data) == kDataNames.end())
    throw Error("--data " + a.data + " is not known: use synthetic, fashion-mnist or jpeg");
  if (a.data == "jpeg" && a.data_dir.empty())
    throw Error("--data jpeg needs --data-dir (an image set: `ringbench data make imagenet-like DIR`, or a folder "
                "with one subfolder of JPEGs per class)");
  if (a.epochs > 0 && a.data == "synthetic")
    throw Error("--epochs needs a real dataset (--data fashion-mnist or jpeg); synthetic data has no epochs");
  if (!(a.timeout_s >= 0.1)) throw Error("--timeout must be at least 0.1 seconds");
  if (a.loss_scale != "auto" && !m::parse_loss_scale(a.loss_scale))
    throw Error("--loss-scale " + quote_excerpt(a.loss_scale) +
                ": use auto, none, dynamic or dynamic:INIT with INIT a power of two from 1 to 2^127");
  if (a.migrate.at_step != 0 && loss_scale_options(a).enabled)
    throw Error("--migrate-at with dynamic loss scaling: the scale does not move with a rank yet "
                "(use --loss-scale none)");
  if (!(a.lr > 0)) throw Error("--lr must be > 0");
  if (a.momentum < 0 || a.momentum >= 1) throw Error("--momentum must be in [0, 1)");
  if (a.weight_decay < 0) throw Error("--weight-decay must be >= 0");
  if (a.threads < 0) throw Error("--threads must be >= 0 (0: auto)");
  if (writes_results()) check_output_path(a.json, "--json");
  if (writes_results()) check_output_path(a.save_checkpoint, "--save-checkpoint");
  check_output_path(a.timeline, "--timeline");  // every rank writes its own, beside this name
}

// A lower bound of the activation working set a step rewrites: every layer's output and its
// gradient for the batch (what a migrating rank's framebuffer holds besides its state).
size_t activation_bytes(const m::Graph& g, int batch) {
  size_t floats = 0;
  for (const m::Node& n : g.nodes) floats += size_t(n.out.numel());
  return 2 * floats * size_t(batch) * sizeof(float);
}

// A lower bound of what one rank's host memory must hold: every layer's output and its gradient
// for the whole batch, and the parameters and their gradients. Refuses at once what this
// machine cannot hold (`--image-size 100000`), naming the sizes, instead of failing later in
// an allocation with a bare bad_alloc.
void check_host_memory(const m::Graph& g, const TrainArgs& a) {
  const double gib = double(1 << 30);
  const double act_gib = double(activation_bytes(g, a.batch)) / gib;
  const double param_gib = 2.0 * double(g.param_count) * 4.0 / gib;
  const double have = physical_memory_gib();
  if (act_gib + param_gib <= have) return;
  auto fmt = [](double x) {
    char b[32];
    std::snprintf(b, sizeof b, x >= 10 ? "%.0f" : "%.1f", x);
    return std::string(b);
  };
  throw Error("--model " + a.model + " --batch " + std::to_string(a.batch) + " at " +
              std::to_string(g.nodes[0].out.h) + "x" + std::to_string(g.nodes[0].out.w) + " px needs at least " +
              fmt(act_gib + param_gib) + " GiB per rank (layer outputs and their gradients " + fmt(act_gib) +
              " GiB, parameters and gradients " + fmt(param_gib) + " GiB); this machine has " + fmt(have) +
              " GiB: use a smaller --batch or --image-size");
}

// Where training computes, from --device, --backend and --transport: the device (cpu or cuda)
// and the backend. What cannot run here fails now, before any rank starts, saying why.
Placement place_training(const TrainArgs& a, const Backend& comm) {
  const bool gpu_backend = a.backend == "cudnn", cpu_backend = a.backend != "auto" && !gpu_backend;
  if (comm.gpu_buffers && (a.device == "cpu" || cpu_backend))
    throw Error("--transport " + comm.name + " reduces GPU buffers: it needs --device cuda (or auto) and a GPU backend");
  // One rank communicates with no one: only a backend that also decides the device must be here.
  const bool communicates = a.ranks > 1 || launched_by_mpirun() || launched_by_env() || launched_by_slurm();
  if (const std::string why = comm.unavailable && (communicates || comm.gpu_buffers) ? comm.unavailable() : "";
      !why.empty())
    throw Error("--transport " + comm.name + " is not available: " + why);
  if (a.ranks_per_node < 1) throw Error("--ranks-per-node must be at least 1 (got " + std::to_string(a.ranks_per_node) + ")");
  // The world's size is known here only for --ranks N; under mpirun each rank checks it as it connects.
  if (const std::string why = a.hierarchical ? hierarchical_unfit(a.ranks > 1 ? a.ranks : a.ranks_per_node, a.ranks_per_node, comm) : "";
      !why.empty())
    throw Error(why);
  if (a.hierarchical && a.autotune)
    throw Error("--autotune with --hierarchical: not supported (its cost model is the flat ring's)");
  if (a.hierarchical && a.migrate.at_step != 0)
    throw Error("--migrate-at re-forms the flat ring only; --hierarchical runs two levels that do not re-form yet");
  if (remote::is_remote_device(a.device)) {
    if (comm.gpu_buffers || a.backend != "auto")
      throw Error("--device " + a.device + ": the device server chooses the backend, and the gradients come to host "
                  "memory: leave --backend auto and use a transport of host buffers");
    return {"remote", "remote"};
  }
  return place_compute(a.device, a.backend, comm.gpu_buffers);
}

// The model, checked before any rank starts, so that a typo fails once, at once.
m::Graph build_graph(const TrainArgs& a) {
  m::ModelOptions mo{a.classes, a.image_size, a.aux_logits, -1};
  try {
    return m::build_model(a.model, mo);
  } catch (const std::invalid_argument& e) {
    throw Error(e.what());
  }
}

// The options that shape the training: every rank must share them.
std::string train_shape(const TrainArgs& a, const m::Graph& graph, const Placement& where) {
  return a.model + " batch " + std::to_string(a.batch) + " steps " + std::to_string(a.steps) + " warmup " +
         std::to_string(a.warmup) + " epochs " + std::to_string(a.epochs) + " transport " + a.transport +
         " fusion " + std::to_string(a.fusion_mb) + " first " + std::to_string(a.first_bucket_mb) + " data " +
         a.data + " classes " + std::to_string(graph.output_node().out.c) + " size " +
         to_string(graph.input_dims()) + " aux " + std::to_string(a.aux_logits) + " overlap " +
         std::to_string(!a.no_overlap) + " seed " + std::to_string(a.seed) + " layer_times " +
         std::to_string(a.layer_times) + " device " + where.device + " precision " + a.precision + " loss_scale " + a.loss_scale + " wire " +
         dtype_name(gradient_wire(a)) + " autotune " + std::to_string(a.autotune) + " " +
         std::to_string(a.autotune_top_k) + " " + std::to_string(a.autotune_repeats) + " " +
         std::to_string(a.autotune_steps) + " ranks_per_node " + std::to_string(a.ranks_per_node) + " hierarchical " +
         std::to_string(a.hierarchical);
}

models::Precision train_precision(const TrainArgs& a) {
  const auto p = m::parse_precision(a.precision);
  if (!p) throw Error("--precision " + a.precision + ": not one of " + join_names(m::precision_names()));
  return *p;
}

DType gradient_wire(const TrainArgs& a) {
  if (a.compression == "auto") {
    // Our ring carries the narrow types; auto leaves the others (mpi, nccl) their fp32.
    const Backend* b = find_backend(a.transport);
    if (!b || !is_ring(*b)) return DType::f32;
    const m::Precision p = train_precision(a);
    return p == m::Precision::bf16 ? DType::bf16 : p == m::Precision::fp16 ? DType::f16 : DType::f32;
  }
  if (a.compression == "none") return DType::f32;
  return parse_dtype(a.compression);
}


std::string gradient_wire_why(const TrainArgs& a) {
  if (a.compression != "auto") return " (--compression " + a.compression + ")";
  if (gradient_wire(a) != DType::f32) return " (--compression auto: the training precision)";
  return train_precision(a) == m::Precision::bf16 || train_precision(a) == m::Precision::fp16
             ? " (--compression auto: --transport " + a.transport + " allreduces fp32 only)"
             : "";
}


namespace {

// --device remote:HOST:PORT: the network lives on the device server; this rank keeps the host
// buffers (the optimizer, the loss) and its share of the ring.
void set_up_remote(Compute& c, const TrainArgs& a, const m::Graph& graph) {
  if (!a.vgpu.profile.empty() && a.vgpu.profile != "none")
    throw Error("--device remote: the device server shares its device (its --policy); --profile is for local ones");
  auto dev = std::make_shared<remote::RemoteDevice>(remote::parse_device_spec(a.device),
                                                    remote::device_secret(a.secret_file),
                                                    std::chrono::milliseconds(int64_t(a.timeout_s * 1000)));
  c.net = remote::open_remote_network(std::move(dev), graph, a.batch, {.precision = train_precision(a)}, a.classes,
                                      a.image_size, a.aux_logits);
}

}  // namespace

// Sets up `c`, and `vgpu` from --profile. The CPU budget is measured after the ranks' last
// barrier (the option check), so that siblings starting up are not counted busy.
void set_up_compute(Compute& c, VgpuSetup& vgpu, const RankJob& job, const TrainArgs& a, const m::Graph& graph,
                    const Placement& where) {
  const bool on_gpu = where.device == "cuda";
  if (a.threads == 0) c.budget = measure_cpu_budget(ranks_on_this_host(*job.world));
  c.threads = c.budget ? c.budget->threads : a.threads;
  m::set_compute_threads(c.threads);
  c.gpu = on_gpu ? use_local_gpu(*job.world) : -1;  // current from here on
  if (where.device == "remote") return set_up_remote(c, a, graph);
  vgpu = setup_vgpu(a.vgpu, on_gpu ? "cuda" : where.backend, a.timeout_s);
  if (job.rank == 0 && vgpu.mode != "none") std::printf("# vGPU profile %s: %s\n", vgpu.profile.c_str(), vgpu.message.c_str());
  c.net = m::make_network(where.backend, graph, a.batch,
                          {.measure_conv_algos = a.conv_algo == "measure", .precision = train_precision(a)});
  if (c.net->on_device() != on_gpu)
    throw Error("the " + c.net->backend() + " backend computes on the " + (c.net->on_device() ? "GPU" : "CPU") +
                ", not on --device " + where.device);
  const bool side = a.weight_grad_thread == "on" ||
                    (a.weight_grad_thread == "auto" && c.budget && c.budget->weight_grad_thread);
  if (side && !on_gpu) {
    // Measured busy and free CPUs: the data gradients (the critical path) on the free ones, the
    // weight gradients on the busy ones, where they take what share they get.
    const bool place = c.budget && !c.budget->busy_cpus.empty() && !c.budget->free_cpus.empty();
    c.weight_grad_thread = c.net->set_weight_grad_thread(true, place ? c.budget->busy_cpus : std::vector<int>{});
    if (place && c.weight_grad_thread) m::pin_this_thread(c.budget->free_cpus);
  }
  if (a.weight_grad_thread == "on" && !c.weight_grad_thread)
    throw Error("--weight-grad-thread on: the " + c.net->backend() + " backend on the " + (on_gpu ? "GPU" : "CPU") +
                " has no second thread for weight gradients (the CPU's onednn backend has)");
}


// --data jpeg: this rank's shards of the image set, through the input pipeline.
void load_jpeg_data(TrainData& d, const TrainArgs& a, const m::Graph& graph, int rank, int n) {
  const m::Dims in = graph.input_dims();
  if (in.c != 3 || in.h != in.w)
    throw Error("--data jpeg needs a model taking square RGB images; " + a.model + " takes " + m::to_string(in));
  std::shared_ptr<const input::ImageSet> set = input::open_image_set(a.data_dir);
  const int classes = graph.output_node().out.c;
  if (set->classes() > uint32_t(classes))
    throw Error("--data-dir " + a.data_dir + " has " + std::to_string(set->classes()) + " classes, more than " +
                a.model + "'s " + std::to_string(classes) + " outputs: use --classes " + std::to_string(set->classes()));
  input::PipelineOptions o;
  o.batch = a.batch;
  o.image_size = in.h;
  o.threads = a.data_threads;
  o.prefetch = a.data_prefetch;
  o.seed = a.seed;
  o.rank = rank;
  o.ranks = n;
  o.allow_damaged = a.allow_damaged_data;
  o.timeout = std::chrono::milliseconds(int64_t(a.timeout_s * 1000));
  auto source = std::make_unique<m::JpegBatchSource>(set, o);
  d.pipeline = &source->pipeline();
  if (a.epochs > 0)
    d.total_steps = std::max<int64_t>(int64_t(a.epochs) * source->pipeline().steps_per_epoch(), a.warmup + 1);
  d.source = std::move(source);
}

// Synthetic data, or this rank's shard of Fashion-MNIST. In place: the source refers to the
// training set.
void load_data(TrainData& d, const TrainArgs& a, const m::Graph& graph, int rank, int n) {
  d.total_steps = int64_t(a.warmup) + a.steps;
  if (a.data == "synthetic") {
    d.source = m::make_synthetic_source(graph.input_dims(), graph.output_node().out.c, a.batch, a.seed, rank);
    return;
  }
  if (a.data == "jpeg") return load_jpeg_data(d, a, graph, rank, n);
  const std::string dir = a.data_dir.empty() ? m::kFashionMnistDir : a.data_dir;
  d.train_set = m::load_fashion_mnist(dir, true, rank, n);
  if (!(d.train_set.dims == graph.input_dims()))
    throw Error("Fashion-MNIST images are " + m::to_string(d.train_set.dims) + " but " + a.model + " takes " +
                m::to_string(graph.input_dims()) + ": use --model lenet");
  d.source = m::make_dataset_source(d.train_set, a.batch, a.seed);
  if (a.epochs > 0) {
    const int64_t smallest_shard = 60000 / n;  // every rank must run the same number of steps
    const int64_t per_epoch = std::min<int64_t>(smallest_shard, int64_t(d.train_set.size())) / a.batch;
    d.total_steps = std::max<int64_t>(int64_t(a.epochs) * per_epoch, a.warmup + 1);
  }
  if (a.eval) d.test_set = m::load_fashion_mnist(dir, false, rank, n);
}

m::LossScaleOptions loss_scale_options(const TrainArgs& a) {
  if (a.loss_scale == "auto") return {.enabled = train_precision(a) == m::Precision::fp16};
  const auto o = m::parse_loss_scale(a.loss_scale);
  if (!o) throw Error("--loss-scale " + quote_excerpt(a.loss_scale) + " is not known");
  return *o;
}

m::TrainOptions train_options(const TrainArgs& a, const RankJob& job, const VgpuSetup& vgpu) {
  m::TrainOptions to;
  to.rank = job.rank;
  to.world = job.n;
  to.sgd = {float(a.lr * job.n), float(a.momentum), float(a.weight_decay)};
  to.first_bucket_bytes = size_t(a.first_bucket_mb * (1 << 20));
  to.fusion_bytes = size_t(a.fusion_mb * (1 << 20));
  to.overlap = !a.no_overlap;
  to.seed = a.seed;
  to.timeout = 2 * job.timeout;
  to.gate = vgpu.gate.get();
  to.loss_scale = loss_scale_options(a);
  return to;
}

// --migrate-*: the migration this rank takes part in, or none.
std::unique_ptr<migrate::Migration> plan_migration(const TrainArgs& a, const RankJob& job, const m::Graph& graph,
                                                   const VgpuSetup& vgpu, int64_t total_steps, bool is_target,
                                                   const std::vector<std::string>& argv, migrate::RingHooks hooks) {
  const size_t act = activation_bytes(graph, a.batch);
  const size_t state = (2 * graph.param_count + graph.state_count) * sizeof(float) + act;
  const migrate::MigratePlan plan = migrate::make_plan(a.migrate, job.n, a.warmup, total_steps,
                                                       uint64_t(vgpu.profile_framebuffer_mib) << 20, state);
  if (!plan.enabled()) return nullptr;
  const migrate::StateLayout layout =
      migrate::layout_state(graph.param_count, graph.state_count, act, plan.framebuffer_bytes);
  using Role = migrate::Migration::Role;
  const Role role = is_target ? Role::target : job.rank == plan.rank ? Role::source : Role::other;
  migrate::RankSide side{*job.store, job.rank, job.timeout, job.world->secret, job.world->default_addr, argv};
  return std::make_unique<migrate::Migration>(plan, role, std::move(side), std::move(hooks), layout);
}

}  // namespace ringbench
