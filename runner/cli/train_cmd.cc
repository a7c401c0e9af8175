#include "runner/cli/train_cmd.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <future>
#include <optional>
#include <thread>

#include "collectives/allreduce.h"
#include "base/errors.h"
#include "base/device_memory.h"
#include "base/output_file.h"
#include "collectives/auth.h"
#include "models/checkpoint.h"
#include "models/network.h"
#include "models/trainer.h"
#include "models/zoo.h"
#include "ringbench/config.h"
#include "runner/cli/allreduce_cmd.h"
#include "runner/cli/command.h"
#include "runner/backends/backend.h"
#include "base/bytes.h"
#include "runner/cli/cpu_budget.h"
#include "runner/cli/gpu.h"
#include "runner/cli/metadata.h"
#include "runner/cli/train_results.h"
#include "runner/cli/world.h"
#include "runner/migrate/migration.h"
#include "runner/migrate/target_process.h"

#if RINGBENCH_HAVE_CUDA
#include "models/cuda/gpu_reducers.h"
#endif

namespace ringbench {
namespace {

using json = nlohmann::json;
using Millis = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
namespace m = ringbench::models;

int ranks_on_this_host(const World& w) {
  if (const char* s = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) return std::max(1, std::atoi(s));
  if (w.launcher == "local" || w.launcher == "env") return w.size;  // all on this machine
  return 1;
}

void validate(const TrainArgs& a) {
  if (a.batch < 1) throw Error("--batch must be >= 1");
  if (a.steps < 1 && a.epochs < 1) throw Error("--steps must be >= 1");
  if (a.warmup < 0) throw Error("--warmup must be >= 0");
  if (a.layer_times < 0) throw Error("--layer-times must be >= 0");
  if (a.epochs < 0) throw Error("--epochs must be >= 0");
  if (a.fusion_mb < 0 || a.first_bucket_mb < 0) throw Error("--fusion-mb and --first-bucket-mb must be >= 0");
  backend_for("--transport", a.transport, any_backend);
  if (a.device != "cpu" && a.device != "cuda" && a.device != "auto")
    throw Error("--device " + a.device + " is not known: use cpu, cuda or auto");
  parse_bytes(a.stage_piece);
  if (a.conv_algo != "measure" && a.conv_algo != "heuristic")
    throw Error("--conv-algo " + a.conv_algo + " is not known: use measure or heuristic");
  validate_backend_options();
  if (a.data != "synthetic" && a.data != "fashion-mnist")
    throw Error("--data " + a.data + " is not known: use synthetic or fashion-mnist");
  if (a.epochs > 0 && a.data == "synthetic")
    throw Error("--epochs needs a real dataset (--data fashion-mnist); synthetic data has no epochs");
  if (!(a.timeout_s >= 0.1)) throw Error("--timeout must be at least 0.1 seconds");
  if (!(a.lr > 0)) throw Error("--lr must be > 0");
  if (a.momentum < 0 || a.momentum >= 1) throw Error("--momentum must be in [0, 1)");
  if (a.weight_decay < 0) throw Error("--weight-decay must be >= 0");
  if (a.threads < 0) throw Error("--threads must be >= 0 (0: auto)");
  if (writes_results()) check_output_path(a.json, "--json");
  if (writes_results()) check_output_path(a.save_checkpoint, "--save-checkpoint");
  check_output_path(a.timeline, "--timeline");  // every rank writes its own, beside this name
}

// A lower bound of what one rank's host memory must hold: every layer's output and its gradient
// for the whole batch, and the parameters and their gradients. Refuses at once what this
// machine cannot hold (`--image-size 100000`), naming the sizes, instead of failing later in
// an allocation with a bare bad_alloc.
void check_host_memory(const m::Graph& g, const TrainArgs& a) {
  double activations = 0;  // floats per image
  for (const m::Node& n : g.nodes) activations += double(n.out.numel());
  const double gib = double(1 << 30);
  const double act_gib = 2.0 * activations * double(a.batch) * 4.0 / gib;
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
Placement place(const TrainArgs& a, const Backend& comm) {
  const bool gpu_backend = a.backend == "cudnn", cpu_backend = a.backend != "auto" && !gpu_backend;
  if (comm.gpu_buffers && (a.device == "cpu" || cpu_backend))
    throw Error("--transport " + comm.name + " reduces GPU buffers: it needs --device cuda (or auto) and a GPU backend");
  // One rank communicates with no one: only a backend that also decides the device must be here.
  const bool communicates = a.ranks > 1 || launched_by_mpirun() || launched_by_env();
  if (const std::string why = comm.unavailable && (communicates || comm.gpu_buffers) ? comm.unavailable() : "";
      !why.empty())
    throw Error("--transport " + comm.name + " is not available: " + why);
  return place_compute(a.device, a.backend, comm.gpu_buffers);
}

std::string timeline_path(const std::string& base, int rank, int n) {
  if (n == 1) return base;
  const auto dot = base.rfind('.');
  const auto slash = base.rfind('/');
  const std::string suffix = ".rank" + std::to_string(rank);
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return base + suffix;
  return base.substr(0, dot) + suffix + base.substr(dot);
}


// FNV-1a over the parameters' bits: deterministic initialisation gives every rank the same.
uint64_t param_hash(const std::vector<float>& params) {
  uint64_t h = 1469598103934665603ull;
  for (float v : params) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    h = (h ^ bits) * 1099511628211ull;
  }
  return h;
}

// Every rank's host facts (`self`), as every rank lists them; each checks every rank's
// parameter hash against its own.
json exchange_hosts(const RankJob& job, json self, const std::vector<float>& params) {
  const uint64_t h = param_hash(params);
  self["param_hash"] = h;
  return job.exchange_hosts(self, true, [&](const json& host, int r) {
    if (host.value("param_hash", json()) != h)
      throw Error("rank " + std::to_string(r) + " initialised different parameters than rank " +
                  std::to_string(job.rank) + " (different build or seed?)");
  });
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
         std::to_string(a.layer_times) + " device " + where.device;
}

// Where this rank computes: its threads, its GPU (-1: none), and the network.
struct Compute {
  std::optional<CpuBudget> budget;  // --threads 0: what the machine has to spare
  int threads = 1;
  int gpu = -1;
  std::unique_ptr<m::Network> net;
};

// Sets up `c`, and `vgpu` from --profile. The CPU budget is measured after the ranks' last
// barrier (the option check), so that siblings starting up are not counted busy.
void set_up_compute(Compute& c, VgpuSetup& vgpu, const RankJob& job, const TrainArgs& a, const m::Graph& graph,
                    const Placement& where) {
  const bool on_gpu = where.device == "cuda";
  if (a.threads == 0) c.budget = measure_cpu_budget(ranks_on_this_host(*job.world));
  c.threads = c.budget ? c.budget->threads : a.threads;
  m::set_compute_threads(c.threads);
  c.gpu = on_gpu ? use_local_gpu(*job.world) : -1;  // current from here on
  vgpu = setup_vgpu(a.vgpu, on_gpu ? "cuda" : where.backend, a.timeout_s);
  if (job.rank == 0 && vgpu.mode != "none") std::printf("# vGPU profile %s: %s\n", vgpu.profile.c_str(), vgpu.message.c_str());
  c.net = m::make_network(where.backend, graph, a.batch, {.measure_conv_algos = a.conv_algo == "measure"});
  if (c.net->on_device() != on_gpu)
    throw Error("the " + c.net->backend() + " backend computes on the " + (c.net->on_device() ? "GPU" : "CPU") +
                ", not on --device " + where.device);
}

// The batches this rank trains on, and how many steps (warmup included).
struct TrainData {
  std::unique_ptr<m::BatchSource> source;
  m::Dataset train_set, test_set;  // Fashion-MNIST's (test_set: with --eval)
  int64_t total_steps = 0;
};

// Synthetic data, or this rank's shard of Fashion-MNIST. In place: the source refers to the
// training set.
void load_data(TrainData& d, const TrainArgs& a, const m::Graph& graph, int rank, int n) {
  d.total_steps = int64_t(a.warmup) + a.steps;
  if (a.data == "synthetic") {
    d.source = m::make_synthetic_source(graph.input_dims(), graph.output_node().out.c, a.batch, a.seed, rank);
    return;
  }
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
  return to;
}

// The ranks' communicator (more than one rank).
// `key_prefix`: the store's namespace of its rendezvous ("train"; "train/m1" once the ring re-formed
// around a migrated rank).
std::unique_ptr<Communicator> connect_ranks(const RankJob& job, const TrainArgs& a, const Backend& comm_backend,
                                            const std::string& key_prefix) {
  NetArgs net_args;
  net_args.addr = a.addr;
  net_args.iface = a.iface;
  net_args.sockets_per_peer = a.sockets_per_peer;
  return comm_backend.make({*job.store, job.rank, job.n, *job.world, job.timeout, net_args, key_prefix});
}

json path_json(const Communicator* comm) {
  if (!comm) return {{"transport", "none (1 rank)"}};
  json path = json::object();
  for (auto& [k, v] : comm->path_info()) path[k] = v;
  return path;
}

// Gradients where the backend reduces them, or device gradients staged through a pinned host
// mirror for a backend of host memory (models/cuda/gpu_reducers.h).
m::ReducerFactory reducers(Communicator* comm, bool gpu_buffers, bool on_gpu,
                           [[maybe_unused]] const std::string& stage_piece) {
  return [=](float* grads, size_t count) -> std::unique_ptr<m::GradientReducer> {
    if (!on_gpu || gpu_buffers) return comm->gradient_reducer(grads, count);
#if RINGBENCH_HAVE_CUDA
    return m::make_staged_reducer(grads, count, [comm](float* pinned, size_t c) { return comm->gradient_reducer(pinned, c); },
                                  parse_bytes(stage_piece));
#else
    throw Error("--device cuda in a build without CUDA");
#endif
  };
}

// This rank's host record: the harness's, with its threads.
json host_self(const RankJob& job, const Compute& c, const json& path) {
  json self = job.host_record(path, gpu_json(c.gpu));  // the rank's device (-1: the current one, if any)
  self["threads"] = c.threads;
  self["threads_auto"] = c.budget ? c.budget->to_json() : json(nullptr);
  return self;
}

json bucket_list(const m::BucketPlan& plan, const m::Graph& graph) {
  json buckets = json::array();
  for (const auto& b : plan.buckets)
    buckets.push_back({{"offset", b.offset}, {"count", b.count}, {"bytes", b.count * 4},
                       {"tensors", b.last - b.first + 1},
                       {"first_tensor", graph.params[size_t(b.last)].name},
                       {"last_tensor", graph.params[size_t(b.first)].name}});
  return buckets;
}

// Every rank's parameters and batch-norm statistics at the end, hashed (rank 0 gets every rank's,
// as hex). Synchronous SGD leaves the parameters equal on every rank, so rank 0 fails the run
// when one differs: a rank that diverged (a migrated rank restored wrongly, a misrouted
// gradient) never passes silently. The statistics are each rank's own (its batches').
json final_hashes(const RankJob& job, const m::Trainer& trainer) {
  auto hex = [](const std::vector<float>& v) {
    char h[17];
    std::snprintf(h, sizeof h, "%016llx", (unsigned long long)param_hash(v));
    return std::string(h);
  };
  job.store->set("train/final_hash/" + std::to_string(job.rank),
                 json{hex(trainer.host_params()), hex(trainer.host_state())}.dump());
  json params = json::array(), state = json::array();
  for (int r = 0; job.rank == 0 && r < job.n; ++r) {
    const json h = get_rank_json(*job.store, "train/final_hash/" + std::to_string(r), r, 2 * job.timeout,
                                 json::value_t::array);
    if (h.size() != 2 || !h[0].is_string() || !h[1].is_string())
      throw Error("rank " + std::to_string(r) + " published final hashes that are not two strings");
    params.push_back(h[0]);
    state.push_back(h[1]);
    if (h[0] != params[0])
      throw Error("rank " + std::to_string(r) + "'s parameters differ from rank 0's at the end (hash " +
                  h[0].get<std::string>() + " vs " + params[0].get<std::string>() + "): the ranks diverged");
  }
  return {{"params", params}, {"batchnorm_state", state}};
}

// What one rank's training is made of, for the metadata and the header.
struct TrainSetup {
  const TrainArgs& a;
  const m::Graph& graph;
  const Placement& where;
  const Compute& c;
  const m::Trainer& trainer;
  const json& path;
  const json& hosts;
};

json train_meta(const RankJob& job, const TrainSetup& t, const std::vector<std::string>& argv,
                int64_t measured_steps, const VgpuSetup& vgpu) {
  const TrainArgs& a = t.a;
  const int n = job.n;
  const auto& plan = t.trainer.plan();
  json meta = job.common_meta(argv, t.hosts);
  meta.update({{"model", a.model}, {"params", t.graph.param_count},
               {"param_tensors", t.graph.params.size()}, {"input", m::to_string(t.graph.input_dims())},
               {"classes", t.graph.output_node().out.c}, {"aux_logits", a.aux_logits},
               {"device", t.where.device}, {"backend", t.c.net->backend()}, {"backend_detail", t.c.net->describe()},
               {"threads_per_rank", t.c.threads},
               {"threads_auto", t.c.budget ? t.c.budget->to_json() : json(nullptr)},
               {"batch_per_rank", a.batch},
               {"transport", n > 1 ? a.transport : "none"}, {"allreduce", t.trainer.reducer()},
               {"path", t.path}, {"warmup", a.warmup}, {"steps", measured_steps},
               {"data", a.data}, {"overlap", !a.no_overlap},
               {"sgd", {{"lr_base", a.lr}, {"lr", a.lr * n}, {"momentum", a.momentum},
                        {"weight_decay", a.weight_decay}}},
               {"seed", a.seed},
               {"buckets", {{"first_bucket_bytes", plan.first_bucket_bytes},
                            {"fusion_bytes", plan.fusion_bytes}, {"list", bucket_list(plan, t.graph)}}},
               {"vgpu", vgpu.to_json()}});
  return meta;
}

// The `#` lines before the steps (rank 0): model, backend, ranks, buckets, sgd, every rank's host.
void print_header(const RankJob& job, const TrainSetup& t, const m::BatchSource& source) {
  const TrainArgs& a = t.a;
  const int n = job.n;
  auto b = build_info();
  std::printf("# ringbench %s (%s) train: %s, %zu parameters in %zu tensors, input %s, %d classes\n",
              b["ringbench"].get<std::string>().c_str(), b["commit"].get<std::string>().c_str(),
              a.model.c_str(), t.graph.param_count, t.graph.params.size(),
              m::to_string(t.graph.input_dims()).c_str(), t.graph.output_node().out.c);
  if (t.where.device == "cuda")
    std::printf("# backend %s on the GPU (--device cuda): %s\n", t.c.net->backend().c_str(), t.c.net->describe().c_str());
  else
    std::printf("# backend %s, threads per rank %s: %s\n", t.c.net->backend().c_str(),
                t.c.budget ? t.c.budget->describe().c_str() : (std::to_string(t.c.threads) + " (--threads)").c_str(),
                t.c.net->describe().c_str());
  std::printf("# %d rank(s), launcher %s, batch %d per rank, gradient allreduce: %s%s\n", n,
              job.world->launcher.c_str(), a.batch, t.trainer.reducer().c_str(),
              a.no_overlap ? " after backward (--no-overlap)" : ", overlapped with backward");
  std::printf("# buckets (fusion %g MiB, first %g MiB): %s\n", a.fusion_mb, a.first_bucket_mb,
              m::describe(t.trainer.plan()).c_str());
  std::printf("# sgd lr %g (= %g x %d ranks) momentum %g weight decay %g, seed %llu, data %s\n",
              a.lr * n, a.lr, n, a.momentum, a.weight_decay, (unsigned long long)a.seed,
              source.describe().c_str());
  for (auto& hj : t.hosts) {
    std::printf("#  rank %2d  host %s  pid %d  cpu %s  threads %d  path:", hj["rank"].get<int>(),
                hj["host"].get<std::string>().c_str(), hj["pid"].get<int>(),
                hj["cpu"].get<std::string>().c_str(), hj["threads"].get<int>());
    for (auto& [k, v] : hj["path"].items()) std::printf(" %s=%s", k.c_str(), v.get<std::string>().c_str());
    std::printf("\n");
  }
  print_gpu_lines(t.hosts);
  std::fflush(stdout);
}

// The measured steps and their window; the unmeasured steps that kept a shared device busy after.
struct Steps {
  std::vector<m::StepRecord> measured;
  Clock::time_point begin, end;
  int64_t tail_steps = 0;
  bool left = false;  // the rank migrated: its target trains on
};

// What a migrating rank has done before step s, for its target.
migrate::LoopState loop_state(const Steps& st, int64_t s, int traced, const m::BatchSource& source) {
  migrate::LoopState l;
  l.steps_done = s;
  l.cursor = source.cursor();
  l.measured = st.measured;
  l.traced = traced;
  l.begin_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(st.begin.time_since_epoch()).count();
  return l;
}

void log_step(const TrainArgs& a, int64_t s, int64_t total_steps, bool measuring, const m::StepRecord& r) {
  std::printf("step %5lld/%lld%s  loss %.4f  acc %5.1f%%  %.1f img/sec per rank  step %.3f s  "
              "compute %.3f s  allreduce %.3f s  exposed %.3f s\n",
              (long long)(s + 1), (long long)total_steps, measuring ? "" : " (warmup)", r.loss,
              100.0 * r.correct / a.batch, a.batch / r.step_s, r.step_s, r.compute_s,
              r.allreduce_s, r.exposed_s);
  std::fflush(stdout);
}

// The training loop: warmup, then the measured steps (the first --timeline-steps traced). A
// migration (`mig`) may stop it at a step boundary; a target starts `from` where its source was.
Steps train_steps(m::Trainer& trainer, m::BatchSource& source, const TrainArgs& a, const RankJob& job,
                  int64_t total_steps, const VgpuSetup& vgpu, bool timeline, migrate::Migration* mig,
                  migrate::LoopState from) {
  Steps st;
  st.measured = std::move(from.measured);
  int traced = from.traced;
  if (from.begin_ns) st.begin = Clock::time_point(std::chrono::nanoseconds(from.begin_ns));
  for (int64_t s = from.steps_done; s < total_steps; ++s) {
    const bool measuring = s >= a.warmup;
    if (s == a.warmup) {
      if (vgpu.gate) vgpu.gate->begin_measuring();  // VMs sharing the device measure together
      st.begin = Clock::now();
    }
    double stalled = 0;  // at this step's boundary, for a migration: part of the job's step
    if (mig && mig->before_step(s, trainer, source, loop_state(st, s, traced, source)) == migrate::Migration::Next::leave) {
      st.left = true;
      return st;
    }
    if (mig) stalled = mig->take_wait_s();
    const bool trace = timeline && measuring && traced < a.timeline_steps;
    traced += trace;
    m::StepRecord r = trainer.step(source, trace);
    r.step_s += stalled;
    if (mig) mig->after_step(s, trainer);
    if (!std::isfinite(r.loss))
      throw Error("the loss became " + std::to_string(r.loss) + " at step " + std::to_string(s) + ": lower --lr");
    if (measuring) st.measured.push_back(r);
    if (job.rank == 0 && a.log_every > 0 && ((s + 1) % a.log_every == 0 || s + 1 == total_steps))
      log_step(a, s, total_steps, measuring, r);
  }
  st.end = Clock::now();
  // Keep the shared device busy, unmeasured, until every VM sharing it has measured.
  while (vgpu.gate && vgpu.gate->others_measuring()) {
    if (Clock::now() - st.end > job.timeout)
      throw Error("the other VMs sharing the device were still measuring " + std::to_string(a.timeout_s) +
                  " s after this one finished");
    trainer.step(source, false);
    ++st.tail_steps;
  }
  return st;
}

// --layer-times: extra steps, on every rank (they allreduce), each layer timed.
std::unique_ptr<m::LayerProfile> profile_layers(m::Trainer& trainer, m::BatchSource& source, const TrainArgs& a,
                                                const m::Graph& graph) {
  if (a.layer_times <= 0) return nullptr;
  auto profile = std::make_unique<m::LayerProfile>(graph, a.batch);
  for (int s = 0; s < a.layer_times; ++s) trainer.step(source, false, profile.get());
  return profile;
}

// Rank 0's results: the summary, every rank's figures, the layer times and the test set's
// accuracy, printed and in `doc`.
void report(json& doc, const std::vector<json>& ranks, const Steps& st, const VgpuSetup& vgpu, int n, bool on_gpu,
            const m::LayerProfile* profile, const json& eval) {
  json summary = summarize(ranks, st.measured, vgpu, st.tail_steps, {st.begin, st.end});
  summary["timeline"] = step_timeline(ranks, doc["meta"]["buckets"]["list"]);
  doc["summary"] = summary;
  doc["per_rank"] = per_rank_img_s(ranks);
  doc["ranks"] = ranks;
  if (!eval.is_null()) doc["eval"] = eval;

  print_summary(summary, st.measured.size(), n, vgpu);
  if (profile) {
    const char* method = on_gpu ? "the stream synchronised around each layer" : "wall clock around each layer";
    doc["layer_times"] = profile->to_json();
    doc["layer_times"]["method"] = method;
    doc["layer_times"]["rank"] = 0;
    std::printf("# where time goes (rank 0, median of %d profiled steps after the measured ones, %s):\n%s",
                profile->steps(), method, profile->to_text().c_str());
  }
  if (!eval.is_null())
    std::printf("Test accuracy: %.2f%% (%lld of %lld), test loss %.4f\n",
                100 * eval["test_accuracy"].get<double>(), (long long)eval["correct"].get<int64_t>(),
                (long long)eval["samples"].get<int64_t>(), eval["test_loss"].get<double>());
  std::fflush(stdout);
}

// --save-checkpoint (rank 0): the final parameters, identical on every rank, and this rank's
// batch-norm state (each rank's running statistics are of its own batches). Returns the path and
// the file's SHA-256 for the metadata.
json save_checkpoint(const TrainArgs& a, const m::Graph& graph, const m::Trainer& trainer) {
  m::Checkpoint c = m::Checkpoint::describe(graph);
  c.params = trainer.host_params();
  c.state = trainer.host_state();
  const std::string bytes = c.encode();
  write_file_atomic(a.save_checkpoint, bytes);
  const std::string sha = auth::sha256_hex(bytes);
  std::printf("# checkpoint: %s (%zu bytes, sha256 %s)\n", a.save_checkpoint.c_str(), bytes.size(), sha.c_str());
  return {{"path", a.save_checkpoint}, {"sha256", sha}, {"bytes", bytes.size()},
          {"format_version", m::kCheckpointVersion}};
}

// Like a real vGPU: the model and batch do not fit the profile's framebuffer. Not a failure of
// the run: a result, with the numbers.
int does_not_fit(RankJob& job, const DeviceOutOfMemory& e, json& doc, const TrainArgs& a,
                 const std::vector<std::string>& argv, const std::string& backend, const VgpuSetup& vgpu) {
  std::fflush(stdout);
  const double mib = 1 << 20;
  std::cerr << job.tag + "ringbench train: does not fit: " + a.model + " batch " + std::to_string(a.batch) + " on " +
                   vgpu.profile + ": " + e.what() + "\n"
            << std::flush;  // one write per line: ranks share the terminal
  if (job.rank == 0 && !a.json.empty()) {
    doc["meta"] = {{"command", argv}, {"model", a.model}, {"batch_per_rank", a.batch}, {"ranks", job.n},
                   {"backend", backend}, {"vgpu", vgpu.to_json()}};
    doc["does_not_fit"] = {{"profile", vgpu.profile}, {"framebuffer_mib", double(e.cap) / mib},
                           {"requested_mib", double(e.requested) / mib}, {"in_use_mib", double(e.in_use) / mib},
                           {"needed_at_least_mib", double(e.in_use + e.requested) / mib},
                           {"allocation", e.what_for}, {"message", e.what()}};
    job.write_json(doc);
  }
  job.world->mpi = false;
  return kDoesNotFitExit;
}

}  // namespace

namespace {

// A lower bound of the activation working set a step rewrites: every layer's output and its
// gradient for the batch (what a migrating rank's framebuffer holds besides its state).
size_t activation_bytes(const m::Graph& g, int batch) {
  size_t floats = 0;
  for (const m::Node& n : g.nodes) floats += size_t(n.out.numel());
  return 2 * floats * size_t(batch) * sizeof(float);
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

void print_migration(const json& mj) {
  if (mj.is_null()) return;
  const double mib = 1 << 20;
  if (!mj.value("moved", false)) {
    std::printf("# migration of rank %d FAILED, resumed on its node: %s\n", mj.value("rank", -1),
                mj.value("error", std::string("?")).c_str());
  } else {
    std::printf("# migration of rank %d (%s) to %s: framebuffer %.0f MiB, %d pre-copy round(s) %.1f MiB in %.2f s; "
                "stun %.3f s (%.1f MiB copied stunned); total %.2f s; the ring stalled %.3f s\n",
                mj["rank"].get<int>(), mj["method"].get<std::string>().c_str(), mj["to"].get<std::string>().c_str(),
                mj["framebuffer_bytes"].get<double>() / mib, mj["precopy_rounds"].get<int>(),
                mj["precopy_bytes"].get<double>() / mib, mj["precopy_s"].get<double>(), mj["stun_s"].get<double>(),
                mj["stun_bytes"].get<double>() / mib, mj["total_s"].get<double>(), mj["ring_stall_s"].get<double>());
  }
  std::fflush(stdout);
}

}  // namespace

namespace {

// What every rank decided before its world existed.
struct TrainPlan {
  const TrainArgs& a;
  const std::vector<std::string>& argv;
  const m::Graph& graph;
  const Backend& comm_backend;
  const Placement& where;
  Millis timeout;
  bool is_target;  // a migrated rank's new process
};

// After the steps: every rank's records and hashes to rank 0, which reports and writes them.
void finish_rank(RankJob& job, const TrainPlan& p, m::Trainer& trainer, TrainData& data, const Steps& st,
                 const VgpuSetup& vgpu, m::Timeline* timeline, migrate::Migration* mig, json& doc) {
  const TrainArgs& a = p.a;
  const auto profile = profile_layers(trainer, *data.source, a, p.graph);
  const std::vector<json> ranks = gather_steps(*job.store, job.rank, job.n, st.measured, a.batch, 2 * p.timeout);
  const json hashes = final_hashes(job, trainer);
  const json eval = data.test_set.labels.empty()
                        ? json()
                        : gather_eval(trainer, data.test_set, *job.store, job.rank, job.n, 2 * p.timeout);
  const json moved = mig && job.rank == 0 ? mig->result(2 * p.timeout) : json();
  if (timeline && !moved.is_null()) migrate::trace_migration(moved, *timeline);
  if (timeline) write_file_atomic(timeline_path(a.timeline, job.rank, job.n), timeline->to_json());
  if (job.rank != 0) return;
  if (!a.save_checkpoint.empty()) doc["meta"]["checkpoint"] = save_checkpoint(a, p.graph, trainer);
  report(doc, ranks, st, vgpu, job.n, p.where.device == "cuda", profile.get(), eval);
  doc["summary"]["final_hashes"] = hashes;
  if (!moved.is_null()) doc["migration"] = moved;
  print_migration(moved);
  job.write_json(doc);
}

// One rank's run: setup, the steps (a migration target's from where its source stopped), results.
int train_rank(RankJob& job, const TrainPlan& p, json& doc, VgpuSetup& vgpu) {
  const TrainArgs& a = p.a;
  // Every rank must train the same thing; compare the options that shape it with rank 0's.
  job.check_same_options(train_shape(a, p.graph, p.where), "train the same model the same way");
  Compute c;
  set_up_compute(c, vgpu, job, a, p.graph, p.where);
  TrainData data;
  load_data(data, a, p.graph, job.rank, job.n);
  m::TrainOptions to = train_options(a, job, vgpu);
  std::unique_ptr<m::Timeline> timeline;
  if (!a.timeline.empty()) {
    timeline = std::make_unique<m::Timeline>(job.rank);
    to.timeline = timeline.get();
  }
  if (a.migrate.at_step != 0 && !is_ring(p.comm_backend))
    throw Error("--migrate-at re-forms our ring: use --transport " + backend_names(is_ring));
  // Made at setup; outlives the trainer's reducer. A migration target joins the ring later.
  std::unique_ptr<Communicator> comm =
      job.n > 1 && !p.is_target ? connect_ranks(job, a, p.comm_backend, "train") : nullptr;
  const json path = path_json(comm.get());
  auto reducers_of = [&](Communicator* cm) {
    return reducers(cm, p.comm_backend.gpu_buffers, p.where.device == "cuda", a.stage_piece);
  };
  m::Trainer trainer(*c.net, to, comm ? reducers_of(comm.get()) : m::ReducerFactory{});
  // The old ring's goodbyes (bounded waits for every peer's) run beside the new ring's setup.
  std::future<void> retired;
  migrate::RingHooks hooks{
      [&] { retired = std::async(std::launch::async, [old = std::move(comm)]() mutable { old.reset(); }); },
      [&](int epoch) {
        comm = connect_ranks(job, a, p.comm_backend, "train/m" + std::to_string(epoch));
        trainer.connect(reducers_of(comm.get()));
      }};
  const auto mig = plan_migration(a, job, p.graph, vgpu, data.total_steps, p.is_target, p.argv, hooks);
  const json hosts = p.is_target ? json::array() : exchange_hosts(job, host_self(job, c, path), trainer.host_params());
  const TrainSetup setup{a, p.graph, p.where, c, trainer, path, hosts};
  doc["meta"] = train_meta(job, setup, p.argv, data.total_steps - a.warmup, vgpu);
  if (job.rank == 0) print_header(job, setup, *data.source);

  migrate::LoopState from;
  if (p.is_target) from = mig->arrive(trainer, *data.source, data.total_steps, trainer.plan().buckets.size());
  const Steps st = train_steps(trainer, *data.source, a, job, data.total_steps, vgpu, timeline != nullptr, mig.get(),
                               std::move(from));
  if (st.left) return mig->wait_for_target();
  finish_rank(job, p, trainer, data, st, vgpu, timeline.get(), mig.get(), doc);
  return 0;
}

}  // namespace

int run_train(const TrainArgs& a, const std::vector<std::string>& argv) {
  validate(a);
  const Millis timeout(static_cast<long>(a.timeout_s * 1000));
  const m::Graph graph = build_graph(a);
  const Backend& comm_backend = backend_for("--transport", a.transport, any_backend);
  const Placement where = place(a, comm_backend);
  // With a vGPU profile the framebuffer's cap decides, and a model too big for it is the
  // sweep's "does not fit" result rather than an error.
  if (where.device != "cuda" && (a.vgpu.profile.empty() || a.vgpu.profile == "none")) check_host_memory(graph, a);
  // Ranks sharing this machine's cores: OpenMP workers must sleep, not spin, at barriers, or a
  // descheduled worker stalls its team (and spinning starves the communication threads).
  if (a.ranks > 1 && !launched_by_mpirun() && !launched_by_env()) setenv("OMP_WAIT_POLICY", "passive", 0);
  RankJob job = start_rank_job({"train", a.ranks, a.addr, a.iface, a.secret_file, timeout, a.json,
                                comm_backend.gpu_buffers ? "--transport " + comm_backend.name : "",
                                comm_backend.needs_mpirun},
                               argv);
  if (job.launched) return *job.launched;
  const TrainPlan plan{a, argv, graph, comm_backend, where, timeout, migrate::target_listen_fd() >= 0};
  if (plan.is_target) job.tag = "[rank " + std::to_string(job.rank) + " on its new node] ";
  json doc;
  VgpuSetup vgpu;
  try {
    return train_rank(job, plan, doc, vgpu);
  } catch (const DeviceOutOfMemory& e) {
    return does_not_fit(job, e, doc, a, argv, where.backend, vgpu);
  } catch (const std::exception& e) {
    const bool oom = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
    return job.fail(e, doc, oom ? out_of_memory_text("use a smaller --batch or --image-size") : std::string(e.what()));
  }
}

}  // namespace ringbench
