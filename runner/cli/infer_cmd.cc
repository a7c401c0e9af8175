#include "runner/cli/infer_cmd.h"

#include <chrono>
#include <cstdio>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/device_memory.h"
#include "base/errors.h"
#include "base/output_file.h"
#include "models/bucket_plan.h"
#include "models/checkpoint.h"
#include "models/data.h"
#include "models/model_buffers.h"
#include "models/train_buffers.h"
#include "models/zoo.h"
#include "runner/job/gpu.h"
#include "runner/job/metadata.h"
#include "runner/cli/options.h"
#include "runner/infer/loadgen.h"
#include "runner/infer/network_target.h"
#include "runner/remote/remote_network.h"

namespace ringbench {

using nlohmann::json;
namespace m = ringbench::models;

namespace {

// Inference at the largest batch (one network, parameters, state) against training at the same
// batch (its network, parameters, gradients, momentum, state).
json memory_json(const std::string& backend, const m::Graph& g, int batch, size_t served_bytes, m::Precision p) {
  const size_t infer = peak_bytes_of([&] {
    auto net = m::make_network(backend, g, batch, {.inference_only = true, .precision = p});
    auto buffers = m::make_model_buffers(*net, 1);
  });
  const size_t train = peak_bytes_of([&] {
    auto net = m::make_network(backend, g, batch, {.precision = p});
    const m::BucketPlan plan = m::plan_buckets(g, 1 << 20, 25 << 20);
    auto buffers = m::make_train_buffers(*net, plan, {}, 1);
  });
  const double mib = 1 << 20;
  return {{"batch", batch}, {"inference_mib", double(infer) / mib}, {"training_mib", double(train) / mib},
          {"inference_over_training", train ? double(infer) / double(train) : 0.0},
          {"served_sizes_mib", double(served_bytes) / mib}};
}

infer::RunRules rules_for(const InferArgs& a, infer::Scenario s) {
  infer::RunRules r = infer::loadgen_rules(s);
  if (a.min_duration_s >= 0) r.min_duration_s = a.min_duration_s;
  if (a.min_queries >= 0) r.min_count = a.min_queries;
  r.max_duration_s = a.max_duration_s;
  r.check();
  return r;
}

void announce(const char* what, const infer::RunRules& r) {
  std::printf("# %s: at least %.0f s and %lld %s (at most %.0f s)...\n", what, r.min_duration_s,
              static_cast<long long>(r.min_count), std::string(what).rfind("Offline", 0) == 0 ? "samples" : "queries",
              r.max_duration_s);
  std::fflush(stdout);
}

bool wants(const InferArgs& a, const std::string& scenario) {
  std::stringstream ss(a.scenarios);
  for (std::string s; std::getline(ss, s, ',');)
    if (s == scenario) return true;
  return false;
}

json run_offline_sweep(const InferArgs& a, infer::NetworkTarget& target, infer::Clock& clock) {
  const infer::RunRules rules = rules_for(a, infer::Scenario::Offline);
  json out = json::array();
  for (int b : a.batches.empty() ? target.allowed_batches() : a.batches) {
    announce(("Offline batch " + std::to_string(b)).c_str(), rules);
    const infer::OfflineResult r = infer::run_offline(target, clock, b, rules);
    std::printf("%s\n", r.text().c_str());
    out.push_back(r.to_json());
  }
  return out;
}

json run_single(const InferArgs& a, infer::NetworkTarget& target, infer::Clock& clock) {
  const infer::RunRules rules = rules_for(a, infer::Scenario::SingleStream);
  announce("SingleStream", rules);
  const infer::SingleStreamResult r = infer::run_single_stream(target, clock, rules);
  std::printf("%s\n", r.text().c_str());
  return r.to_json();
}

json run_server(const InferArgs& a, infer::NetworkTarget& target, infer::Clock& clock) {
  infer::ServerSettings s;
  s.latency_bound_s = a.latency_bound_ms * 1e-3;
  s.max_batch = a.max_batch;
  s.batch_timeout_s = a.batch_timeout_ms * 1e-3;
  s.seed = a.seed;
  s.rules = rules_for(a, infer::Scenario::Server);
  if (a.server_qps > 0) {
    s.target_qps = a.server_qps;
    announce("Server", s.rules);
    const infer::ServerResult r = infer::run_server(target, clock, s);
    std::printf("%s\n", r.text().c_str());
    return {{"runs", json::array({r.to_json()})}};
  }
  std::printf("# Server: searching for the highest QPS whose p99 is within %.3g ms (each try a full run)\n",
              a.latency_bound_ms);
  std::fflush(stdout);
  const infer::QpsSearch search = infer::find_peak_qps(
      [&](double qps) {
        infer::ServerSettings at = s;
        at.target_qps = qps;
        char what[64];
        std::snprintf(what, sizeof what, "Server at %g QPS", qps);
        announce(what, s.rules);
        const infer::ServerResult r = infer::run_server(target, clock, at);
        std::printf("%s\n", r.text().c_str());
        return r;
      },
      // Not below arrivals ten bounds apart on average: there a run that misses the bound is
      // slow by itself, not queued, and halving further would only lengthen the runs.
      {.start_qps = 10, .precision = 0.05, .max_runs = 30, .min_qps = 0.1 / s.latency_bound_s});
  const std::string text = search.text();  // every try (printed as it ran), then the peak
  std::printf("%s\n", text.substr(text.rfind('\n', text.size() - 2) + 1).c_str());
  return search.to_json();
}

void check_args(const InferArgs& a) {
  for (int b : a.batches)
    if (b < 1 || b > a.max_batch)
      throw Error("--batches: " + std::to_string(b) + " is outside 1..--max-batch (" + std::to_string(a.max_batch) + ")");
  std::stringstream ss(a.scenarios);
  for (std::string s; std::getline(ss, s, ',');)
    if (s != "offline" && s != "single-stream" && s != "server")
      throw Error("--scenarios: '" + s + "' is not offline, single-stream or server");
  if (!(a.latency_bound_ms > 0)) throw Error("--latency-bound-ms must be > 0");
  if (a.batch_timeout_ms < 0) throw Error("--batch-timeout-ms must be >= 0");
  if (a.accuracy && a.data != "fashion-mnist")
    throw Error("--accuracy needs a labelled test set: --data fashion-mnist");
  if (!a.data.empty() && a.data != "fashion-mnist") throw Error("--data " + a.data + " is not known: use fashion-mnist");
  if (!a.data.empty() && !a.accuracy) throw Error("--data is read only with --accuracy");
  if (!a.json_path.empty()) check_output_path(a.json_path, "--json");
  if (!(a.timeout_s > 0)) throw Error("--timeout must be > 0");
  if (!a.vgpu.scheduler.empty() && a.accuracy)
    throw Error("--accuracy measures no time: it takes no --vgpu-scheduler");
}

// LoadGen's accuracy mode, simplified: the whole test set through the largest served network.
json run_accuracy(const InferArgs& a, infer::NetworkTarget& target) {
  const m::Dataset test = m::load_fashion_mnist(a.data_dir.empty() ? m::kFashionMnistDir : a.data_dir, false);
  const infer::NetworkTarget::Accuracy r = target.accuracy(test);
  const double acc = r.total ? double(r.correct) / double(r.total) : 0.0;
  const std::string params = a.checkpoint.empty() ? "untrained (seeded with --seed " + std::to_string(a.seed) + ")"
                                                  : "from checkpoint " + a.checkpoint;
  std::printf("Accuracy: %.2f%% (%lld of %lld) on the %s test set at batch %d; parameters %s\n", 100 * acc,
              (long long)r.correct, (long long)r.total, a.data.c_str(), a.max_batch, params.c_str());
  return {{"accuracy", acc}, {"correct", r.correct}, {"samples", r.total}, {"data", a.data},
          {"batch", a.max_batch}, {"trained", !a.checkpoint.empty()}, {"parameters", params}};
}

// The checkpoint's values, checked against the model (nullopt without --checkpoint), and its
// path and SHA-256 for the metadata.
std::optional<m::Checkpoint> read_checkpoint(const InferArgs& a, const m::Graph& g, json& meta) {
  if (a.checkpoint.empty()) {
    meta["checkpoint"] = nullptr;
    return std::nullopt;
  }
  m::Checkpoint c = m::load_checkpoint(a.checkpoint, g);
  meta["checkpoint"] = {{"path", a.checkpoint}, {"sha256", c.file_sha256}};
  return c;
}

}  // namespace

void add_infer_options(CLI::App& cmd, InferArgs& a) {
  cmd.add_option("--model", a.model, "lenet, mobilenet_v1 or inception_v3")->capture_default_str();
  cmd.add_option("--backend", a.backend, "auto, reference, onednn or cudnn")->capture_default_str();
  cmd.add_option("--precision", a.precision, "Arithmetic of the forward pass: fp32, tf32 (cudnn, compute capability "
                 "8.0+), bf16 (onednn on a CPU with AVX512-BF16 or AMX; cudnn 8.0+: convolutions and fc layers only) "
                 "or fp16 (cudnn 7.0+: convolutions and fc layers only); parameters are stored in fp32")
      ->capture_default_str()->check(CLI::IsMember(m::precision_names()));
  cmd.add_option("--device", a.device, "cpu, cuda, auto or remote:HOST:PORT[,fraction=F][,transport=tcp|verbs] (a `ringbench "
                 "device-server`)")->capture_default_str()
      ->check([](const std::string& d) {
        if (remote::is_remote_device(d)) return std::string();  // parsed, naming what is wrong, by run_infer
        return d == "cpu" || d == "cuda" || d == "auto" ? std::string() : "not cpu, cuda, auto or remote:HOST:PORT";
      });
  cmd.add_option("--secret-file", a.secret_file, "--device remote: the device server's secret (else RINGBENCH_SECRET)");
  cmd.add_option("--image-size", a.image_size, "Input size in pixels (0: the model's)")->capture_default_str();
  cmd.add_option("--threads", a.threads, "CPU threads (0: every core)")->capture_default_str()->check(CLI::Range(0, 4096));
  cmd.add_option("--max-batch", a.max_batch, "Largest batch served (networks are built for the powers of two "
                 "below it and for it; a batch is padded up to the next)")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd.add_option("--scenarios", a.scenarios, "Comma-separated: offline, single-stream, server")->capture_default_str();
  cmd.add_option("--batches", a.batches, "Offline: the batch sizes swept (default: every served size)")->delimiter(',');
  cmd.add_option("--latency-bound-ms", a.latency_bound_ms, "Server: the p99 latency bound (LoadGen's default: 10)")
      ->capture_default_str();
  cmd.add_option("--batch-timeout-ms", a.batch_timeout_ms, "Server: longest wait of a query for its batch to fill")
      ->capture_default_str();
  cmd.add_option("--server-qps", a.server_qps, "Server: one run at this rate (0: search for the peak)")->capture_default_str();
  cmd.add_option("--seed", a.seed, "Seed of the arrivals and the parameters")->capture_default_str();
  cmd.add_option("--min-duration", a.min_duration_s, "Seconds each run lasts at least (-1: LoadGen's 600; shorter "
                 "runs are reported as INVALID under LoadGen's rules)")->capture_default_str();
  cmd.add_option("--min-queries", a.min_queries, "Queries (Offline: samples) each run issues at least (-1: "
                 "LoadGen's per scenario)")->capture_default_str();
  cmd.add_option("--max-duration", a.max_duration_s, "Seconds after which a run issues nothing more")->capture_default_str();
  cmd.add_option("--json", a.json_path, "Write the results as JSON to this file");
  cmd.add_option("--checkpoint", a.checkpoint, "Serve the parameters of this checkpoint (train --save-checkpoint) "
                 "instead of seeded ones; it must hold --model");
  cmd.add_flag("--accuracy", a.accuracy, "Accuracy mode: run the test set of --data through the network at "
               "--max-batch and report the accuracy (no scenarios)");
  cmd.add_option("--data", a.data, "--accuracy's dataset: fashion-mnist");
  cmd.add_option("--data-dir", a.data_dir, "Where the Fashion-MNIST idx files are (default "
                 "/usr/share/datasets/fashion-mnist)");
  add_vgpu_train_options(cmd, a.vgpu);
  cmd.add_option("--timeout", a.timeout_s, "With --vgpu-scheduler: seconds to wait for the scheduler (to connect, "
                 "for a time slice, for the other VMs to start measuring)")->capture_default_str();
}

namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

int64_t since_epoch_ns(SteadyTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Like a real vGPU: the served networks do not fit the profile's framebuffer. Not a failure of
// ringbench: exit 3 and a "does_not_fit" record, as train does.
int does_not_fit(const InferArgs& a, const DeviceOutOfMemory& e, json& doc, const VgpuSetup& vgpu) {
  std::fflush(stdout);
  std::fprintf(stderr, "ringbench infer: does not fit: %s up to batch %d on %s: %s\n", a.model.c_str(), a.max_batch,
               vgpu.profile.c_str(), e.what());
  doc["meta"]["vgpu"] = vgpu.to_json();
  doc["does_not_fit"] = does_not_fit_json(e, vgpu.profile);
  if (!a.json_path.empty()) write_file_atomic(a.json_path, doc.dump(1) + "\n");
  return kDoesNotFitExit;
}

// The largest batch's memory against training's, measured without the framebuffer's cap: the
// training network is only a yardstick, not something this process keeps.
json uncapped_memory_json(const std::string& backend, const m::Graph& g, int batch, size_t served, m::Precision p) {
  DeviceMemory& dm = DeviceMemory::instance();
  const size_t cap = dm.cap();
  dm.set_cap(0);
  json out;
  try {
    out = memory_json(backend, g, batch, served, p);
  } catch (...) {
    dm.set_cap(cap);
    throw;
  }
  dm.set_cap(cap);
  return out;
}

// After its own runs, a VM sharing the device keeps serving, unmeasured, until every VM sharing
// it has measured (as train's tail steps), so that each VM's figures describe the device shared
// by all: Server runs at the rate it found (its peak, or its one rate), else batches of
// --max-batch back to back. Returns the runs (batches) served so.
int64_t serve_while_others_measure(const InferArgs& a, const json& server, infer::NetworkTarget& target,
                                   infer::Clock& clock, m::DeviceGate& gate) {
  double qps = 0;
  if (server.is_object() && server.value("found", false)) qps = server.value("peak_qps", 0.0);
  else if (server.is_object() && server.contains("runs")) qps = server["runs"][0].value("target_qps", 0.0);
  infer::ServerSettings s;
  s.target_qps = qps;
  s.latency_bound_s = a.latency_bound_ms * 1e-3;
  s.max_batch = a.max_batch;
  s.batch_timeout_s = a.batch_timeout_ms * 1e-3;
  s.seed = a.seed;
  s.rules = {.min_duration_s = 0.25, .min_count = 1, .max_duration_s = a.max_duration_s};
  const SteadyTime end = std::chrono::steady_clock::now();
  int64_t runs = 0;
  for (; gate.others_measuring(); ++runs) {
    if (std::chrono::steady_clock::now() - end > std::chrono::duration<double>(a.max_duration_s))
      throw Error("the other VMs sharing the device were still measuring " + std::to_string(a.max_duration_s) +
                  " s (--max-duration) after this one finished");
    if (qps > 0) infer::run_server(target, clock, s);
    else target.run(a.max_batch);
  }
  return runs;
}

// Said before the scenarios start: at LoadGen's full rules (600 s a run) a default `infer` runs
// for the better part of an hour and would otherwise say nothing about it until the first run ends.
void announce_expected_duration(const InferArgs& a, const infer::NetworkTarget& target) {
  int runs = 0;
  double floor_s = 0;
  std::string parts;
  auto add = [&](infer::Scenario s, int n, const std::string& what) {
    runs += n;
    floor_s += n * rules_for(a, s).min_duration_s;
    parts += (parts.empty() ? "" : ", ") + what;
  };
  if (wants(a, "offline")) {
    const size_t n = a.batches.empty() ? target.allowed_batches().size() : a.batches.size();
    add(infer::Scenario::Offline, int(n), "Offline " + std::to_string(n) + " batch size(s)");
  }
  if (wants(a, "single-stream")) add(infer::Scenario::SingleStream, 1, "SingleStream");
  const bool search = wants(a, "server") && a.server_qps <= 0;
  if (wants(a, "server")) add(infer::Scenario::Server, 1, search ? "Server's QPS search" : "Server");
  if (runs == 0) return;
  std::printf("# expected duration: %d run(s) of at least %.3g s each (%s): at least %.1f min; a run also lasts "
              "until its minimum count of queries or samples (--min-queries)%s%s\n", runs, floor_s / runs, parts.c_str(),
              floor_s / 60, search ? "; the QPS search makes a full run per try, up to 30 tries" : "",
              a.min_duration_s < 0 ? "; --min-duration shortens every run (such runs are INVALID under LoadGen's rules)"
                                   : "");
  std::fflush(stdout);
}

// The scenarios, measured: with a scheduler the VMs sharing the device start together, and
// doc["device"] gets this VM's share of it over its measured window.
void run_scenarios(const InferArgs& a, infer::NetworkTarget& target, const VgpuSetup& vgpu, json& doc) {
  infer::SteadyClock clock;
  m::DeviceGate* gate = vgpu.gate.get();
  if (gate) gate->begin_measuring();
  const m::DeviceGate::Usage u0 = gate ? gate->usage() : m::DeviceGate::Usage{};
  const SteadyTime begin = std::chrono::steady_clock::now();
  if (wants(a, "offline")) doc["offline"] = run_offline_sweep(a, target, clock);
  if (wants(a, "single-stream")) doc["single_stream"] = run_single(a, target, clock);
  if (wants(a, "server")) doc["server"] = run_server(a, target, clock);
  const SteadyTime end = std::chrono::steady_clock::now();
  if (!gate) return;
  const m::DeviceGate::Usage u1 = gate->usage();
  const double wall = std::chrono::duration<double>(end - begin).count();
  json& d = doc["device"];
  d.update({{"held_s", u1.held_s - u0.held_s}, {"wait_s", u1.waited_s - u0.waited_s},
            {"utilization", wall > 0 ? (u1.held_s - u0.held_s) / wall : 0.0}, {"slices", u1.slices - u0.slices},
            {"window_ns", {since_epoch_ns(begin), since_epoch_ns(end)}}});
  d["tail_runs"] = serve_while_others_measure(a, doc.value("server", json()), target, clock, *gate);
  std::printf("# device (%s, time-sliced): held %.1f%% of the %.2f s measured, waited %.3f s for slices\n",
              vgpu.profile.c_str(), 100 * d["utilization"].get<double>(), wall, d["wait_s"].get<double>());
}

// The networks of every served size: this process's backend, or a device server's (one connection).
infer::NetworkFactory network_factory(const InferArgs& a, const Placement& where, const m::Graph& g) {
  if (where.device != "remote")
    return [backend = where.backend, &g](int b, const m::NetworkOptions& o) { return m::make_network(backend, g, b, o); };
  if (!a.vgpu.profile.empty() && a.vgpu.profile != "none")
    throw Error("--device remote: the device server shares its device (its --policy); --profile is for local ones");
  auto dev = std::make_shared<remote::RemoteDevice>(remote::parse_device_spec(a.device),
                                                    remote::device_secret(a.secret_file),
                                                    std::chrono::milliseconds(int64_t(a.timeout_s * 1000)));
  return [dev, &g, size = a.image_size](int b, const m::NetworkOptions& o) -> std::unique_ptr<m::Network> {
    return remote::open_remote_network(dev, g, b, o, 0, size, false);
  };
}

// The device server, and the traffic of one query at the largest batch, in the header and the JSON.
void remote_header(infer::NetworkTarget& target, json& doc) {
  const auto& net = dynamic_cast<const remote::RemoteNetwork&>(target.largest());
  const remote::Traffic before = net.total_traffic();
  target.run(target.max_batch());
  const remote::Traffic query = net.total_traffic() - before;
  doc["meta"]["remote"] = net.to_json();
  doc["meta"]["remote"]["per_query_at_max_batch"] = query.to_json();
  doc["meta"]["remote"].erase("per_step");
  std::fputs(net.device_line().c_str(), stdout);
  std::printf("# remote traffic per query of batch %d: %s to the device, %s from it, %llu round trips\n",
              target.max_batch(), remote::bytes_text(query.sent).c_str(), remote::bytes_text(query.received).c_str(),
              (unsigned long long)query.round_trips);
}

}  // namespace

int run_infer(const InferArgs& a) {
  check_args(a);
  const bool remote_device = remote::is_remote_device(a.device);
  if (remote_device && a.backend != "auto") throw Error("--device " + a.device + ": the device server chooses the backend");
  const Placement where = remote_device ? Placement{"remote", "remote"} : place_compute(a.device, a.backend);
  m::set_compute_threads(a.threads > 0 ? a.threads : int(std::thread::hardware_concurrency()));
  const m::Graph g = m::build_model(a.model, {.image_size = a.image_size});
  json meta;
  std::optional<m::Checkpoint> trained = read_checkpoint(a, g, meta);
  const m::Precision precision = *m::parse_precision(a.precision);  // checked by the option
  const VgpuSetup vgpu = setup_vgpu(a.vgpu, where.device == "cuda" ? "cuda" : where.backend, a.timeout_s);
  if (vgpu.mode != "none") std::printf("# vGPU profile %s: %s\n", vgpu.profile.c_str(), vgpu.message.c_str());
  meta.update({{"model", a.model}, {"input", m::to_string(g.input_dims())}, {"backend", where.backend},
               {"device", where.device}, {"threads", m::compute_threads()}, {"build", build_info()}});
  json doc = {{"meta", meta}};
  std::unique_ptr<infer::NetworkTarget> target;
  size_t served = 0;
  try {
    served = peak_bytes_of([&] {
      target = std::make_unique<infer::NetworkTarget>(network_factory(a, where, g), g, a.max_batch, a.seed,
                                                      m::NetworkOptions{.precision = precision},
                                                      trained ? &*trained : nullptr);
    });
  } catch (const DeviceOutOfMemory& e) {
    return does_not_fit(a, e, doc, vgpu);
  }
  trained.reset();  // the target holds its own copy
  target->set_gate(vgpu.gate.get());
  json kept = json::array();
  for (const auto& l : target->largest().layer_precisions())
    kept.push_back({{"layer", g.nodes[size_t(l.node)].name}, {"precision", m::precision_name(l.precision)},
                    {"why", l.why}});
  doc["meta"]["precision"] = {{"compute", m::precision_name(target->largest().precision())},
                              {"layers_otherwise", kept}};
  doc["meta"].update({{"backend_detail", target->describe()}, {"allowed_batches", target->allowed_batches()},
                      {"vgpu", vgpu.to_json()}});
  // Remote: the memory is the device server's, not measured here: null, never a measured zero.
  doc["memory"] = remote_device ? json{{"on_the_device_server", true}, {"inference_mib", nullptr},
                                      {"training_mib", nullptr}, {"inference_over_training", nullptr},
                                      {"served_sizes_mib", nullptr}}
                                : uncapped_memory_json(where.backend, g, a.max_batch, served, precision);
  if (remote_device) remote_header(*target, doc);
  doc["device"] = {{"memory_mib", remote_device ? json(nullptr) : json(double(served) / (1 << 20))},
                   {"cap_mib", vgpu.framebuffer_mib ? json(vgpu.framebuffer_mib) : json(nullptr)}};
  const json& mem = doc["memory"];
  std::printf("# ringbench infer: %s, input %s, backend %s on %s in %s, %d threads, batches %s\n", a.model.c_str(),
              m::to_string(g.input_dims()).c_str(), where.backend.c_str(), where.device.c_str(),
              m::precision_name(target->largest().precision()), m::compute_threads(),
              doc["meta"]["allowed_batches"].dump().c_str());
  if (!remote_device)  // remote: the memory is the device server's, charged to this client's cap there
  std::printf("# memory at batch %d: inference %.1f MiB (network, parameters, batch-norm state) = %.0f%% of "
              "training's %.1f MiB (network, parameters, gradients, momentum, state); all served sizes %.1f MiB%s\n",
              a.max_batch, mem["inference_mib"].get<double>(), 100 * mem["inference_over_training"].get<double>(),
              mem["training_mib"].get<double>(), mem["served_sizes_mib"].get<double>(),
              vgpu.framebuffer_mib ? (" of the " + std::to_string(vgpu.framebuffer_mib) + " MiB framebuffer of " +
                                      vgpu.profile).c_str() : "");
  if (a.accuracy) {
    doc["accuracy"] = run_accuracy(a, *target);
    if (!a.json_path.empty()) write_file_atomic(a.json_path, doc.dump(1) + "\n");
    return 0;
  }
  // Warm-up, as LoadGen's runs leave it to the system under test: every served size runs twice
  // first (first-touch of buffers, oneDNN's and cuDNN's first executions), untimed.
  for (int b : target->allowed_batches())
    for (int i = 0; i < 2; ++i) target->run(b);
  announce_expected_duration(a, *target);
  run_scenarios(a, *target, vgpu, doc);
  if (!a.json_path.empty()) write_file_atomic(a.json_path, doc.dump(1) + "\n");
  return 0;
}

}  // namespace ringbench
