// ringbench: how well does data-parallel training scale on this cluster, and why.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/errors.h"
#include "ringbench/config.h"
#include "ringbench/git_commit.h"
#include "runner/backends/backend.h"
#include "runner/backends/collective.h"
#include "runner/cluster/cluster.h"
#include "runner/cli/data_cmd.h"
#include "runner/cli/device_server_cmd.h"
#include "runner/cli/infer_cmd.h"
#include "runner/job/metadata.h"
#include "runner/cli/options.h"
#include "runner/predict/predict_cmd.h"
#include "runner/tune/tune_cmd.h"
#include "runner/report/report.h"

namespace {

// CLI11 reads "nan", "inf" and "1e999" into a double as they are: every floating-point option of
// every subcommand given must be a finite number, named when it is not.
void check_numbers_are_finite(const CLI::App& app) {
  for (const CLI::Option* o : app.get_options()) {
    if (o->count() == 0 || o->get_type_name() != "FLOAT") continue;
    for (const std::string& v : o->results()) {
      errno = 0;
      const double x = std::strtod(v.c_str(), nullptr);
      if (!std::isfinite(x) || errno == ERANGE)
        throw ringbench::Error(o->get_name() + ": '" + v + "' is not a finite number");
    }
  }
  for (const CLI::App* sub : app.get_subcommands()) check_numbers_are_finite(*sub);
}

// One subcommand: its options write into arguments it owns; run() is called when it was given.
struct Subcommand {
  CLI::App* app;
  std::function<int()> run;
};

template <class Args, class Add, class Run>
Subcommand subcommand(CLI::App& app, const char* name, const std::string& help, Add add_options, Run run) {
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(name, help);
  add_options(*sub, *args);
  return {sub, [args, run] { return run(*args); }};
}

struct ReportArgs {
  std::string run_dir;
  ringbench::ReportOptions options;
};
void add_report_options(CLI::App& cmd, ReportArgs& a) {
  cmd.add_option("run_dir", a.run_dir, "A sweep's results directory")->required();
  cmd.add_option("--straggler-margin", a.options.straggler_margin, "Flag a rank whose median step time "
                 "exceeds the ranks' median by more than this fraction")->capture_default_str();
}
int run_report(const ReportArgs& a) {
  ringbench::write_report(a.run_dir, a.options);
  std::cout << "wrote " << a.run_dir << "/report.md, summary.csv and plots/\n";
  return 0;
}

struct CompareArgs {
  std::string run_a, run_b;
  ringbench::CompareOptions options;
};
void add_compare_options(CLI::App& cmd, CompareArgs& a) {
  cmd.add_option("run_a", a.run_a, "Baseline results directory")->required();
  cmd.add_option("run_b", a.run_b, "Results directory to compare with it")->required();
  cmd.add_option("--threshold", a.options.threshold, "Changes smaller than this fraction are never "
                 "regressions")->capture_default_str();
  cmd.add_flag("--fail-on-regression", a.options.fail_on_regression, "Exit with 1 when a point regressed");
}

struct ClusterArgs {
  std::string action, link = "10gbit";
  int nodes = 4;
};
void add_cluster_options(CLI::App& cmd, ClusterArgs& a) {
  cmd.add_option("action", a.action, "up, down or status")->required()->check(CLI::IsMember({"up", "down", "status"}));
  cmd.add_option("--nodes", a.nodes, "Nodes (namespaces)")->capture_default_str()->check(CLI::Range(1, 64));
  cmd.add_option("--link", a.link, "Link rate of every node (tc syntax: 1gbit, 10gbit, 25gbit)")->capture_default_str();
}

std::vector<Subcommand> subcommands(CLI::App& app, const std::vector<std::string>& argv) {
  using namespace ringbench;
  const std::string rings = backend_names(is_ring), any = backend_names(any_backend),
                    baselines = backend_names([](const Backend& b) { return !b.ring; });
  // `ringbench allreduce`, `allgather`, ...: one command per registered collective.
  std::vector<Subcommand> subs;
  for (const Collective* c : collectives()) {
    const std::string help = "nccl-tests style " + c->name + " sweep (" + c->help + "): ours over " + rings +
                             " (--transport), or the baselines (--impl " + baselines + ").\nRun under mpirun "
                             "(mpirun -np 4 ringbench " + c->name + ") or locally (ringbench " + c->name +
                             " --ranks 4).";
    subs.push_back(subcommand<AllreduceArgs>(
        app, c->name.c_str(), help,
        [c](CLI::App& cmd, AllreduceArgs& a) {
          a.collective = c;
          a.sockets_per_peer = c->sockets_per_peer;
          add_allreduce_options(cmd, a);
        },
        [&argv](const AllreduceArgs& a) { return run_collective_sweep(a, argv); }));
  }
  for (Subcommand& s : std::vector<Subcommand>{
      subcommand<TrainArgs>(
          app, "train",
          "Data-parallel training (synthetic data or Fashion-MNIST) with bucketed gradient allreduce overlapped with "
          "backward, over " + any + " (--transport); Horovod-style img/sec.\nRun under mpirun (mpirun -np 4 ringbench "
          "train --model mobilenet_v1) or locally (ringbench train --ranks 2).",
          add_train_options, [&argv](const TrainArgs& a) { return run_train(a, argv); }),
      subcommand<SweepArgs>(
          app, "sweep",
          "Run a sweep config (models x node counts x transports x repeats, allreduce size sweeps) on a local, "
          "emulated or real cluster; results and report in RESULTS/<run-id>/.\nringbench sweep configs/quick.yaml | "
          "mpirun -np 4 -H a,b,c,d ringbench sweep CONFIG | ringbench sweep --resume RUN_DIR",
          add_sweep_options, [&argv](const SweepArgs& a) { return run_sweep(a, argv); }),
      subcommand<DoctorArgs>(
          app, "doctor",
          "Preflight check of the cluster: build and config on every host, MPI, RDMA ports and GIDs, a verbs RC ping "
          "between every pair of hosts, GPU and vGPU, memory, clocks, the network path.\nmpirun -np 4 -H a,b,c,d "
          "ringbench doctor [--config CONFIG] | ringbench doctor (this host)",
          add_doctor_options, [](const DoctorArgs& a) { return run_doctor(a); }),
      subcommand<InferArgs>(
          app, "infer",
          "Inference as MLPerf's LoadGen measures it: Offline img/s against batch, SingleStream latency "
          "percentiles, and the Server scenario's highest QPS whose p99 meets a bound (Poisson arrivals, dynamic "
          "batching), with inference's memory against training's; under a vGPU profile with --profile, k VMs "
          "serving at once with `ringbench vgpu share -- infer`.\nringbench infer --model mobilenet_v1 "
          "--min-duration 10",
          add_infer_options, [](const InferArgs& a) { return run_infer(a); }),
      subcommand<DataArgs>(
          app, "data",
          "Image sets for train --data jpeg: make a generated ImageNet-like set of JPEG shards, verify one\n"
          "ringbench data make imagenet-like DIR --images 1000 --seed 1 | ringbench data verify DIR",
          add_data_options, [](const DataArgs& a) { return run_data(a); }),
      subcommand<ReportArgs>(app, "report",
                             "Regenerate RUN_DIR's summary.csv, report.md and plots from its raw.jsonl alone",
                             add_report_options, run_report),
      subcommand<PredictArgs>(
          app, "predict",
          "Fit the allreduce's alpha-beta cost from RUN_DIR's collectives points, check every train point's "
          "predicted step time against the measured one, extrapolate scaling to 1024 nodes, or replace the "
          "hardware with a described one (--what-if)",
          add_predict_options, [](const PredictArgs& a) { return run_predict(a); }),
      subcommand<TuneArgs>(
          app, "tune",
          "Tune training's fusion_mb, first_bucket_mb, compression and segment: probe (one-rank timeline, allreduce "
          "sizes), rank every setting with predict's model, measure the top k and the defaults alternately "
          "(docs/tuning.md).\nringbench tune configs/tune-1gbit.yaml | ringbench tune --model lenet --nodes 2",
          add_tune_options, [](const TuneArgs& a) { return run_tune(a); }),
      subcommand<CompareArgs>(
          app, "compare", "Per-point deltas between two sweeps' results, with regressions beyond the noise flagged",
          add_compare_options, [](const CompareArgs& a) { return compare_runs(a.run_a, a.run_b, a.options); }),
      subcommand<ClusterArgs>(
          app, "cluster",
          "An emulated cluster on this machine (network namespaces on a bridge, tc-limited links): up, down or "
          "status",
          add_cluster_options, [](const ClusterArgs& a) { return run_cluster_cmd(a.action, a.nodes, a.link); }),
      subcommand<VgpuArgs>(
          app, "vgpu",
          "vGPU profiles: the catalog (profiles), this machine's GPU (detect), and k VMs time-sliced on one device "
          "(share)",
          add_vgpu_commands, [&argv](const VgpuArgs& a) { return run_vgpu(a, argv); }),
      subcommand<DeviceServerArgs>(
          app, "device-server",
          "Serve this machine's compute device (a GPU, or the CPU standing in for one, marked emulated) to `train` "
          "and `infer --device remote:HOST:PORT[,fraction=F][,transport=tcp|verbs]` over TCP or RDMA verbs, "
          "HMAC-authenticated with the job's secret; "
          "per-client memory caps, time shared by the vGPU policies.\nRINGBENCH_SECRET=$(openssl rand -hex 32) "
          "ringbench device-server --port 7070",
          add_device_server_options, [](const DeviceServerArgs& a) { return run_device_server(a); }),
       })
    subs.push_back(std::move(s));
  return subs;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringbench " RINGBENCH_VERSION
               ": measure how data-parallel training scales across a cluster, and why"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ringbench " RINGBENCH_VERSION " (" RINGBENCH_GIT_COMMIT ")");
  const std::vector<std::string> args(argv, argv + argc);
  const std::vector<Subcommand> subs = subcommands(app, args);
  CLI11_PARSE(app, argc, argv);
  try {
    check_numbers_are_finite(app);
    for (const Subcommand& s : subs)
      if (s.app->parsed()) return s.run();
  } catch (const std::bad_alloc&) {
    std::cerr << "ringbench: error: " + ringbench::out_of_memory_text("use smaller sizes (-e, --batch, --image-size)") + "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ringbench: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
