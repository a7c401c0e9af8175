// Where a sweep's points run. An executor turns a point's command line into ranks:
//   LocalExecutor      - child processes on this machine: over loopback, or one per node of an
//                        emulated cluster (inside the node's network namespace, pinned to its
//                        CPUs); the MPI baseline through mpirun
//   MpiWorkerExecutor  - `mpirun ... ringbench sweep`: sweep rank r starts rank r of every point
//                        with N > r on its own node; the ranks above N wait for the next point
// In both, the sweep hosts a fresh rendezvous store for every point, and every rank's output
// goes to a log file.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/cluster/cluster.h"
#include "runner/job/launcher.h"
#include "runner/sweep/sweep_config.h"
#include "runner/job/world.h"

namespace ringbench {

struct PointJob {
  const SweepPoint* point = nullptr;
  size_t index = 0;               // the point's place in expand_points(config)
  std::vector<std::string> args;  // `ringbench` arguments, the same for every rank
  std::string log_base;           // rank k's output goes to <log_base>.rank<k>.log
  std::chrono::milliseconds timeout{600000};
};

// One process of a point whose processes differ (a device server and its clients).
struct PointProcess {
  std::vector<std::string> args;  // `ringbench` arguments
  std::vector<std::string> env;   // "NAME=value"
  int node = 0;                   // runs in this node's namespace, on its CPUs
  std::string log_path;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Why this point cannot run here ("" when it can).
  virtual std::string unavailable(const SweepPoint& p) const = 0;
  // Runs the point's ranks; rank 0 writes the JSON named in job.args.
  virtual LaunchOutcome run(const PointJob& job, const std::atomic<bool>* stop) = 0;
  // The "cluster" field of every raw record, and the cluster part of env.json.
  virtual nlohmann::json cluster_record() const = 0;
  virtual nlohmann::json describe() const = 0;
  // Arguments every rank of a point of this kind gets here (threads, interface).
  virtual std::vector<std::string> rank_args(PointKind kind) const {
    (void)kind;
    return {};
  }
  // Processes each with its own arguments and node, all at once (remote points). Only local and
  // emulated clusters have them; unavailable() says so elsewhere.
  virtual LaunchOutcome run_processes(const std::vector<PointProcess>& procs, Millis timeout,
                                      const std::atomic<bool>* stop);
  // The address node k is reached at from the other nodes, and its CPUs per node.
  virtual std::string node_addr(int node) const {
    (void)node;
    return "127.0.0.1";
  }
  virtual int cpus_per_node() const { return 1; }
};

// Local ranks (cluster == nullptr: loopback) or one rank per emulated node.
// The CPUs each node of a local or emulated cluster gets when the sweep's largest point has
// `max_nodes` nodes: cluster.cpus_per_node, else this process's usable CPUs split among them (at
// least 1). Each train rank runs as many compute threads (--threads).
int local_cpus_per_node(const SweepConfig& c, int max_nodes);

std::unique_ptr<Executor> make_local_executor(const SweepConfig& c, EmulatedCluster* cluster,
                                              const std::string& note);

// Under mpirun. Rank 0 drives; the others call serve_points() until the sweep ends. Rank 0
// sends only which point runs next and its store; every rank builds the point's command line
// from the config it loaded itself, which check_same_sweep() has compared by hash.
std::unique_ptr<Executor> make_mpi_executor(const SweepConfig& c, World& world);
void serve_points(World& world, const SweepConfig& c, const std::atomic<bool>* stop);
void check_same_sweep(World& world, const SweepConfig& c);
void finish_serving(Executor& executor);  // rank 0: releases the waiting ranks


// env.json: hosts, CPU/GPU, driver and library versions, RDMA devices, kernel, commit,
// relevant environment variables.
nlohmann::json environment_info();

}  // namespace ringbench
