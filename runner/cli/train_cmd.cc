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
#include "base/cpu_time.h"
#include "base/errors.h"
#include "base/device_memory.h"
#include "base/output_file.h"
#include "collectives/auth.h"
#include "models/checkpoint.h"
#include "models/gpu_dispatch.h"
#include "models/network.h"
#include "models/trainer.h"
#include "models/zoo.h"
#include "ringbench/config.h"
#include "runner/cli/allreduce_cmd.h"
#include "runner/cli/command.h"
#include "runner/backends/backend.h"
#include "base/bytes.h"
#include "runner/cli/cpu_budget.h"
#include "runner/cli/train_autotune.h"
#include "runner/job/gpu.h"
#include "runner/job/metadata.h"
#include "runner/cli/train_input.h"
#include "runner/cli/train_results.h"
#include "runner/cli/train_setup.h"
#include "runner/job/world.h"
#include "runner/migrate/migration.h"
#include "runner/migrate/target_process.h"
#include "runner/remote/remote_network.h"


namespace ringbench {

using json = nlohmann::json;  // not in the anonymous namespace: clang -Wshadow, unity batches

namespace {
using Clock = std::chrono::steady_clock;
namespace m = ringbench::models;

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

// The ranks' communicator (more than one rank).
// `key_prefix`: the store's namespace of its rendezvous ("train"; "train/m1" once the ring re-formed
// around a migrated rank).
std::unique_ptr<Communicator> connect_ranks(const RankJob& job, const TrainArgs& a, const Backend& comm_backend,
                                            const std::string& key_prefix) {
  NetArgs net_args;
  net_args.addr = a.addr;
  net_args.iface = a.iface;
  net_args.sockets_per_peer = a.sockets_per_peer;
  net_args.gradient_segment_bytes = parse_bytes(a.segment);
  net_args.hierarchical = a.hierarchical;
  net_args.ranks_per_node = a.ranks_per_node;
  net_args.hier_chunk_bytes = parse_bytes(a.hier_chunk);
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
                           const std::string& stage_piece, DType wire) {
  return [=](float* grads, size_t count) -> std::unique_ptr<m::GradientReducer> {
    if (!on_gpu || gpu_buffers) return comm->gradient_reducer(grads, count, wire);
    return m::make_gpu_staged_reducer(
        grads, count, [comm, wire](float* pinned, size_t c) { return comm->gradient_reducer(pinned, c, wire); },
        parse_bytes(stage_piece));
  };
}

// This rank's host record: the harness's, with its threads.
json host_self(const RankJob& job, const Compute& c, const json& path) {
  json self = job.host_record(path, gpu_json(c.gpu));  // the rank's device (-1: the current one, if any)
  self["threads"] = c.threads;
  self["threads_auto"] = c.budget ? c.budget->to_json() : json(nullptr);
  self["weight_grad_thread"] = c.weight_grad_thread;
  return self;
}

// bytes: on the wire, `element_bytes` per gradient (4, or 2 when compressed).
json bucket_list(const m::BucketPlan& plan, const m::Graph& graph, size_t element_bytes) {
  json buckets = json::array();
  for (const auto& b : plan.buckets)
    buckets.push_back({{"offset", b.offset}, {"count", b.count}, {"bytes", b.count * element_bytes},
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

// What the network computes in, and the layers that compute in another precision.
json precision_json(const m::Network& net) {
  json layers = json::array();
  for (const auto& l : net.layer_precisions())
    layers.push_back({{"node", l.node}, {"layer", net.graph().nodes[size_t(l.node)].name},
                      {"precision", m::precision_name(l.precision)}, {"why", l.why}});
  return {{"compute", m::precision_name(net.precision())}, {"layers_otherwise", layers},
          {"master_weights", "fp32"}};
}

// "# precision bf16 ...": what computes in which precision, and the gradients' type on the wire.
void print_precision(const TrainArgs& a, const m::Network& net, const m::Graph& graph, int ranks) {
  const std::string wire = ranks > 1 ? std::string("as ") + dtype_short_name(gradient_wire(a)) + gradient_wire_why(a)
                                     : std::string("none (1 rank)");
  std::printf("# precision %s: forward and backward in %s; master weights, gradients, batch-norm statistics, loss "
              "and SGD in fp32; gradients on the wire: %s\n",
              m::precision_name(net.precision()), m::precision_name(net.precision()), wire.c_str());
  // One line per (precision, why), with the first few layers' names (the JSON lists every layer).
  constexpr size_t kNamed = 3;
  for (const m::LayerPrecisionGroup& grp : m::group_layer_precisions(net.layer_precisions())) {
    std::string names;
    for (size_t i = 0; i < grp.nodes.size() && i < kNamed; ++i) {
      if (i) names += ", ";
      names += graph.nodes[size_t(grp.nodes[i])].name;
    }
    if (grp.nodes.size() > kNamed) names += ", ...";
    std::printf("#   %zu layer%s in %s (%s): %s\n", grp.nodes.size(), grp.nodes.size() == 1 ? "" : "s",
                m::precision_name(grp.precision), names.c_str(), grp.why.c_str());
  }
  const m::LossScaleOptions ls = loss_scale_options(a);
  if (ls.enabled) std::printf("# loss scale: %s\n", m::describe(ls).c_str());
}

// Dynamic loss scaling's events over the whole run, warmup included (the same on every rank:
// each decides from the averaged gradients).
json loss_scale_json(const m::LossScaler& s) {
  if (!s.enabled()) return {{"mode", "none"}};
  const m::LossScaleCounts& c = s.counts();
  return {{"mode", "dynamic"}, {"initial", s.options().initial}, {"growth_interval", s.options().interval},
          {"final", c.scale}, {"lowest_used", c.lowest}, {"skipped_steps", c.skipped}, {"raised", c.raised}};
}

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
               {"precision", precision_json(*t.c.net)},
               {"gradient_wire", {{"dtype", n > 1 ? dtype_short_name(gradient_wire(a)) : "none (1 rank)"},
                                  {"compression", a.compression},
                                  {"bytes_per_step", n > 1 ? t.graph.param_count * dtype_size(gradient_wire(a)) : 0}}},
               {"threads_per_rank", t.c.threads}, {"weight_grad_thread", t.c.weight_grad_thread},
               {"threads_auto", t.c.budget ? t.c.budget->to_json() : json(nullptr)},
               {"batch_per_rank", a.batch},
               {"transport", n > 1 ? a.transport : "none"}, {"allreduce", t.trainer.reducer()},
               {"ranks_per_node", a.ranks_per_node}, {"hierarchical", a.hierarchical},
               {"hier_chunk_bytes", parse_bytes(a.hier_chunk)},
               {"path", t.path}, {"warmup", a.warmup}, {"steps", measured_steps},
               {"data", a.data}, {"overlap", !a.no_overlap},
               {"sgd", {{"lr_base", a.lr}, {"lr", a.lr * n}, {"momentum", a.momentum},
                        {"weight_decay", a.weight_decay}}},
               {"seed", a.seed},
               {"buckets", {{"first_bucket_bytes", plan.first_bucket_bytes},
                            {"fusion_bytes", plan.fusion_bytes},
                            {"list", bucket_list(plan, t.graph, dtype_size(gradient_wire(a)))}}},
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
    std::printf("# backend %s, threads per rank %s%s: %s\n", t.c.net->backend().c_str(),
                t.c.budget ? t.c.budget->describe().c_str() : (std::to_string(t.c.threads) + " (--threads)").c_str(),
                t.c.weight_grad_thread ? ", weight gradients on a second thread" : "",
                t.c.net->describe().c_str());
  print_precision(a, *t.c.net, t.graph, n);
  std::printf("# %d rank(s), launcher %s, batch %d per rank, gradient allreduce: %s%s\n", n,
              job.world->launcher.c_str(), a.batch, t.trainer.reducer().c_str(),
              a.no_overlap ? " after backward (--no-overlap)" : ", overlapped with backward");
  std::printf("# buckets (fusion %g MiB, first %g MiB): %s\n", a.fusion_mb, a.first_bucket_mb,
              m::describe(t.trainer.plan()).c_str());
  if (a.autotune)
    std::printf("# settings tuned by --autotune (its samples above%s): fusion %g MiB, first bucket %g MiB, "
                "compression %s, segment %s\n", a.autotune_log.empty() ? "" : (", and in " + a.autotune_log).c_str(),
                a.fusion_mb, a.first_bucket_mb, a.compression.c_str(), a.segment.c_str());
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
  // CPU time from `begin` to `end`, this process's and a migrated rank's earlier ones': what the
  // earlier processes used (`cpu_before`) and this process's CPU clock when it began counting.
  double cpu_s = 0, cpu_before = 0, cpu_mark = -1;
  int64_t tail_steps = 0;
  bool left = false;  // the rank migrated: its target trains on
};

// The measured window's CPU time so far (0 before it begins).
double window_cpu_s(const Steps& st) {
  return st.cpu_before + (st.cpu_mark >= 0 ? process_cpu_seconds() - st.cpu_mark : 0);
}

// How many CPUs this rank kept busy over its measured steps: its CPU time over its wall time,
// over the whole window (exact to a scheduler tick at either end; per-step sums would count the
// gaps between steps on one side only).
double cpus_busy(const Steps& st) {
  const double wall = std::chrono::duration<double>(st.end - st.begin).count();
  return wall > 0 ? st.cpu_s / wall : 0;
}

// What a migrating rank has done before step s, for its target.
migrate::LoopState loop_state(const Steps& st, int64_t s, int traced, const m::BatchSource& source) {
  migrate::LoopState l;
  l.steps_done = s;
  l.cursor = source.cursor();
  l.measured = st.measured;
  l.traced = traced;
  l.begin_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(st.begin.time_since_epoch()).count();
  l.cpu_s = window_cpu_s(st);
  return l;
}

void log_step(const TrainArgs& a, int64_t s, int64_t total_steps, bool measuring, const m::StepRecord& r) {
  std::printf("step %5lld/%lld%s  loss %.4f  acc %5.1f%%  %.1f img/sec per rank  step %.3f s  "
              "compute %.3f s  allreduce %.3f s  exposed %.3f s%s\n",
              (long long)(s + 1), (long long)total_steps, measuring ? "" : " (warmup)", r.loss,
              100.0 * r.correct / a.batch, a.batch / r.step_s, r.step_s, r.compute_s,
              r.allreduce_s, r.exposed_s,
              r.skipped ? ("  SKIPPED: inf/NaN gradients at loss scale " + std::to_string(r.loss_scale)).c_str() : "");
  std::fflush(stdout);
}

// The training loop: warmup, then the measured steps (the first --timeline-steps traced). A
// migration (`mig`) may stop it at a step boundary; a target starts `from` where its source was.
Steps train_steps(m::Trainer& trainer, m::BatchSource& source, const TrainArgs& a, const RankJob& job,
                  int64_t total_steps, const VgpuSetup& vgpu, bool timeline, migrate::Migration* mig,
                  migrate::LoopState from, InputMeter& input) {
  Steps st;
  st.measured = std::move(from.measured);
  int traced = from.traced;
  if (from.begin_ns) {  // a migration target, measuring since its source began
    st.begin = Clock::time_point(std::chrono::nanoseconds(from.begin_ns));
    st.cpu_before = from.cpu_s;
    st.cpu_mark = process_cpu_seconds();
  }
  for (int64_t s = from.steps_done; s < total_steps; ++s) {
    const bool measuring = s >= a.warmup;
    if (s == a.warmup) {
      if (vgpu.gate) vgpu.gate->begin_measuring();  // VMs sharing the device measure together
      st.begin = Clock::now();
      st.cpu_mark = process_cpu_seconds();
    }
    double stalled = 0;  // at this step's boundary, for a migration: part of the job's step
    if (mig && mig->before_step(s, trainer, loop_state(st, s, traced, source)) == migrate::Migration::Next::leave) {
      st.left = true;
      return st;
    }
    if (mig) stalled = mig->take_wait_s();
    const bool trace = timeline && measuring && traced < a.timeline_steps;
    traced += trace;
    m::StepRecord r = trainer.step(source, trace);
    r.step_s += stalled;
    input.step_done(measuring, r.step_s);
    if (mig) mig->after_step(s, trainer);
    if (!std::isfinite(r.loss))
      throw Error("the loss became " + std::to_string(r.loss) + " at step " + std::to_string(s) + ": lower --lr");
    if (measuring) st.measured.push_back(r);
    if (job.rank == 0 && (r.skipped || (a.log_every > 0 && ((s + 1) % a.log_every == 0 || s + 1 == total_steps))))
      log_step(a, s, total_steps, measuring, r);
  }
  st.end = Clock::now();
  st.cpu_s = window_cpu_s(st);
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

// What every rank decided before its world existed.
struct TrainPlan {
  const TrainArgs& a;
  const std::vector<std::string>& argv;
  const m::Graph& graph;
  const Backend& comm_backend;
  const Placement& where;
  Millis timeout;
  bool is_target;  // a migrated rank's new process (started by it, or a standby)
};

// After the steps: every rank's records and hashes to rank 0, which reports and writes them.
void finish_rank(RankJob& job, const TrainPlan& p, m::Trainer& trainer, TrainData& data, const Steps& st,
                 const VgpuSetup& vgpu, m::Timeline* timeline, migrate::Migration* mig, const InputMeter& input,
                 json& doc) {
  const TrainArgs& a = p.a;
  const auto profile = profile_layers(trainer, *data.source, a, p.graph);
  const std::vector<json> ranks =
      gather_steps(*job.store, job.rank, job.n, st.measured, cpus_busy(st), a.batch, 2 * p.timeout);
  const json input_summary = gather_input(*job.store, job.rank, job.n, input, st.measured.size(), 2 * p.timeout);
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
  doc["summary"]["loss_scale"] = loss_scale_json(trainer.loss_scaler());
  if (trainer.loss_scaler().enabled())
    std::printf("# loss scale: %lld step(s) skipped for inf/NaN gradients, scale now %g (lowest %g, raised %lld "
                "time(s))\n", (long long)trainer.loss_scaler().counts().skipped, trainer.loss_scaler().counts().scale,
                trainer.loss_scaler().counts().lowest, (long long)trainer.loss_scaler().counts().raised);
  if (!input_summary.is_null()) doc["input"] = input_summary;
  print_input(input_summary);
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
    return reducers(cm, p.comm_backend.gpu_buffers, p.where.device == "cuda", a.stage_piece, gradient_wire(a));
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
  json tuning;  // --autotune: the search, before the warmup and measured steps; they run on its choice
  const TrainArgs tuned =
      a.autotune ? autotune_job({job, a, trainer, comm.get(), *data.source,
                                 [&](const TrainArgs& t) {
                                   return reducers(comm.get(), p.comm_backend.gpu_buffers, p.where.device == "cuda",
                                                   a.stage_piece, gradient_wire(t));
                                 },
                                 p.where.device == "cpu" ? c.threads : 0},
                                tuning)
                 : a;
  const TrainSetup setup{tuned, p.graph, p.where, c, trainer, path, hosts};
  doc["meta"] = train_meta(job, setup, p.argv, data.total_steps - a.warmup, vgpu);
  if (a.autotune) doc["meta"]["autotune"] = tuning;
  if (job.rank == 0) print_header(job, setup, *data.source);

  migrate::LoopState from;
  if (p.is_target) {
    auto arrived = mig->arrive(trainer, *data.source, data.total_steps, trainer.plan().buckets.size());
    if (!arrived) {
      std::fprintf(stderr, "%s# standby: not needed, rank %d stayed on its node\n", job.tag.c_str(), job.rank);
      return 0;
    }
    from = std::move(*arrived);
  }
  InputMeter input(data.pipeline);
  auto* remote_net = dynamic_cast<remote::RemoteNetwork*>(c.net.get());
  if (remote_net && job.rank == 0) std::fputs(remote_net->device_line().c_str(), stdout);
  const Steps st = train_steps(trainer, *data.source, a, job, data.total_steps, vgpu, timeline != nullptr, mig.get(),
                               std::move(from), input);
  if (st.left) return mig->wait_for_target();
  if (remote_net) {  // the batch-norm statistics changed on the device only; the traffic for the record
    remote_net->pull_state();
    doc["meta"]["remote"] = remote_net->to_json();
    if (job.rank == 0) std::fputs(remote_net->traffic_line().c_str(), stdout);
  }
  finish_rank(job, p, trainer, data, st, vgpu, timeline.get(), mig.get(), input, doc);
  return 0;
}

}  // namespace

int run_train(const TrainArgs& a, const std::vector<std::string>& argv) {
  validate_train_args(a);
  const Millis timeout(static_cast<long>(a.timeout_s * 1000));
  const m::Graph graph = build_graph(a);
  const Backend& comm_backend = backend_for("--transport", a.transport, any_backend);
  const Placement where = place_training(a, comm_backend);
  if (a.autotune && where.device == "cuda")
    throw Error("--autotune with --device cuda: not built yet (a GPU backend's per-bucket events are made once; "
                "use --device cpu)");
  // With a vGPU profile the framebuffer's cap decides, and a model too big for it is the
  // sweep's "does not fit" result rather than an error.
  if (where.device != "cuda" && (a.vgpu.profile.empty() || a.vgpu.profile == "none")) check_host_memory(graph, a);
  // Ranks sharing this machine's cores: OpenMP workers must sleep, not spin, at barriers, or a
  // descheduled worker stalls its team (and spinning starves the communication threads).
  if (a.ranks > 1 && !launched_by_mpirun() && !launched_by_env()) setenv("OMP_WAIT_POLICY", "passive", 0);
  // --migrate-to standby under --ranks N: the launcher starts the moving rank's standby too.
  const int standby = a.migrate.to == "standby" && a.migrate.at_step > 0 && !a.migrate.standby
                          ? migrate::moving_rank(a.migrate, a.ranks)
                          : -1;
  if (where.device == "remote") remote::pass_device_secret(a.secret_file);  // for ranks this process starts
  RankJob job = start_rank_job({"train", a.ranks, a.addr, a.iface, a.secret_file, timeout, a.json,
                                comm_backend.gpu_buffers ? "--transport " + comm_backend.name : "",
                                comm_backend.needs_mpirun, standby},
                               argv);
  if (job.launched) return *job.launched;
  const TrainPlan plan{a, argv, graph, comm_backend, where, timeout,
                       migrate::target_listen_fd() >= 0 || a.migrate.standby};
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
