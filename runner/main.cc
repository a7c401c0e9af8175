// ringbench: how well does data-parallel training scale on this cluster, and why.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "collectives/errors.h"
#include "ringbench/config.h"
#include "ringbench/git_commit.h"
#include "runner/allreduce_cmd.h"
#include "runner/train_cmd.h"

int main(int argc, char** argv) {
  CLI::App app{"ringbench " RINGBENCH_VERSION
               ": measure how data-parallel training scales across a cluster, and why"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ringbench " RINGBENCH_VERSION " (" RINGBENCH_GIT_COMMIT ")");

  ringbench::AllreduceArgs ar;
  auto* allreduce = app.add_subcommand(
      "allreduce",
      "nccl-tests style allreduce sweep: our ring over TCP, or MPI_Allreduce as the baseline.\n"
      "Run under mpirun (mpirun -np 4 ringbench allreduce) or locally (ringbench allreduce "
      "--ranks 4).");
  ringbench::add_allreduce_options(*allreduce, ar);

  ringbench::TrainArgs tr;
  auto* train = app.add_subcommand(
      "train",
      "Data-parallel training (synthetic data or Fashion-MNIST) with bucketed gradient allreduce "
      "overlapped with backward; Horovod-style img/sec.\n"
      "Run under mpirun (mpirun -np 4 ringbench train --model mobilenet_v1) or locally "
      "(ringbench train --ranks 2).");
  ringbench::add_train_options(*train, tr);

  CLI11_PARSE(app, argc, argv);
  std::vector<std::string> args(argv, argv + argc);
  try {
    if (allreduce->parsed()) return ringbench::run_allreduce(ar, args);
    if (train->parsed()) return ringbench::run_train(tr, args);
  } catch (const std::exception& e) {
    std::cerr << "ringbench: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
