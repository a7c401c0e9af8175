// ringbench: how well does data-parallel training scale on this cluster, and why.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "base/errors.h"
#include "ringbench/config.h"
#include "ringbench/git_commit.h"
#include "runner/backends/backend.h"
#include "runner/cluster/cluster.h"
#include "runner/cli/metadata.h"
#include "runner/cli/options.h"
#include "runner/predict/predict_cmd.h"
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringbench " RINGBENCH_VERSION
               ": measure how data-parallel training scales across a cluster, and why"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ringbench " RINGBENCH_VERSION " (" RINGBENCH_GIT_COMMIT ")");

  ringbench::AllreduceArgs ar;
  auto* allreduce = app.add_subcommand(
      "allreduce",
      "nccl-tests style allreduce sweep: our ring over " + ringbench::backend_names(ringbench::is_ring) +
          " (--transport), or the baselines (--impl " +
          ringbench::backend_names([](const ringbench::Backend& b) { return !b.ring; }) + ").\n"
          "Run under mpirun (mpirun -np 4 ringbench allreduce) or locally (ringbench allreduce "
      "--ranks 4).");
  ringbench::add_allreduce_options(*allreduce, ar);

  ringbench::TrainArgs tr;
  auto* train = app.add_subcommand(
      "train",
      "Data-parallel training (synthetic data or Fashion-MNIST) with bucketed gradient allreduce "
      "overlapped with backward, over " + ringbench::backend_names(ringbench::any_backend) +
          " (--transport); Horovod-style img/sec.\n"
      "Run under mpirun (mpirun -np 4 ringbench train --model mobilenet_v1) or locally "
      "(ringbench train --ranks 2).");
  ringbench::add_train_options(*train, tr);

  ringbench::SweepArgs sw;
  auto* sweep = app.add_subcommand(
      "sweep",
      "Run a sweep config (models x node counts x transports x repeats, allreduce size sweeps) on a "
      "local, emulated or real cluster; results and report in RESULTS/<run-id>/.\n"
      "ringbench sweep configs/quick.yaml | mpirun -np 4 -H a,b,c,d ringbench sweep CONFIG | "
      "ringbench sweep --resume RUN_DIR");
  ringbench::add_sweep_options(*sweep, sw);

  ringbench::DoctorArgs dr;
  auto* doctor = app.add_subcommand(
      "doctor",
      "Preflight check of the cluster: build and config on every host, MPI, RDMA ports and GIDs, a "
      "verbs RC ping between every pair of hosts, GPU and vGPU, memory, clocks, the network path.\n"
      "mpirun -np 4 -H a,b,c,d ringbench doctor [--config CONFIG] | ringbench doctor (this host)");
  ringbench::add_doctor_options(*doctor, dr);

  std::string report_dir;
  ringbench::ReportOptions ro;
  auto* report = app.add_subcommand("report", "Regenerate RUN_DIR's summary.csv, report.md and plots "
                                    "from its raw.jsonl alone");
  report->add_option("run_dir", report_dir, "A sweep's results directory")->required();
  report->add_option("--straggler-margin", ro.straggler_margin, "Flag a rank whose median step time "
                     "exceeds the ranks' median by more than this fraction")->capture_default_str();

  ringbench::PredictArgs pr;
  auto* predict = app.add_subcommand("predict", "Fit the allreduce's alpha-beta cost from RUN_DIR's collectives "
                                     "points and check every train point's predicted step time against the "
                                     "measured one");
  ringbench::add_predict_options(*predict, pr);

  std::string run_a, run_b;
  ringbench::CompareOptions co;
  auto* compare = app.add_subcommand("compare", "Per-point deltas between two sweeps' results, with "
                                     "regressions beyond the noise flagged");
  compare->add_option("run_a", run_a, "Baseline results directory")->required();
  compare->add_option("run_b", run_b, "Results directory to compare with it")->required();
  compare->add_option("--threshold", co.threshold, "Changes smaller than this fraction are never "
                      "regressions")->capture_default_str();
  compare->add_flag("--fail-on-regression", co.fail_on_regression, "Exit with 1 when a point regressed");

  std::string cluster_action, link = "10gbit";
  int cluster_nodes = 4;
  auto* cluster = app.add_subcommand("cluster", "An emulated cluster on this machine (network namespaces "
                                     "on a bridge, tc-limited links): up, down or status");
  cluster->add_option("action", cluster_action, "up, down or status")->required()
      ->check(CLI::IsMember({"up", "down", "status"}));
  cluster->add_option("--nodes", cluster_nodes, "Nodes (namespaces)")->capture_default_str()
      ->check(CLI::Range(1, 64));
  cluster->add_option("--link", link, "Link rate of every node (tc syntax: 1gbit, 10gbit, 25gbit)")
      ->capture_default_str();

  ringbench::VgpuArgs vg;
  auto* vgpu = app.add_subcommand("vgpu", "vGPU profiles: the catalog (profiles), this machine's GPU "
                                  "(detect), and k VMs time-sliced on one device (share)");
  ringbench::add_vgpu_commands(*vgpu, vg);

  CLI11_PARSE(app, argc, argv);
  std::vector<std::string> args(argv, argv + argc);
  try {
    check_numbers_are_finite(app);
    if (allreduce->parsed()) return ringbench::run_allreduce(ar, args);
    if (train->parsed()) return ringbench::run_train(tr, args);
    if (sweep->parsed()) return ringbench::run_sweep(sw, args);
    if (doctor->parsed()) return ringbench::run_doctor(dr);
    if (report->parsed()) {
      ringbench::write_report(report_dir, ro);
      std::cout << "wrote " << report_dir << "/report.md, summary.csv and plots/\n";
      return 0;
    }
    if (predict->parsed()) return ringbench::run_predict(pr);
    if (compare->parsed()) return ringbench::compare_runs(run_a, run_b, co);
    if (vgpu->parsed()) return ringbench::run_vgpu(vg, args);
    if (cluster->parsed()) return ringbench::run_cluster_cmd(cluster_action, cluster_nodes, link);
  } catch (const std::bad_alloc&) {
    std::cerr << "ringbench: error: " + ringbench::out_of_memory_text("use smaller sizes (-e, --batch, --image-size)") + "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ringbench: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
