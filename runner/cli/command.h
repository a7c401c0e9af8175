// What `ringbench allreduce` and `ringbench train` share around their own work: starting the
// ranks of `--ranks N` (or being one of them), the world, the check that every rank runs with
// the same options, every rank's host record, the metadata common to both, and rank 0's JSON,
// on success and on error.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/job/world.h"

namespace ringbench {

// How a command starts its ranks.
struct CommandSpec {
  std::string name;                    // "allreduce": the store's keys and the messages say it
  int ranks = 1;                       // --ranks
  std::string addr, iface, secret_file;
  std::chrono::milliseconds timeout{30000};
  std::string json;                    // --json: rank 0 writes it ("": nowhere)
  std::string gpu_per_rank;            // launch_ranks_here's: "--impl nccl", or "" when not
  bool need_mpi = false;               // the backend needs mpirun
  int standby_rank = -1;               // launch_ranks_here also starts a standby for this rank
};

// One rank of a command, in its world.
struct RankJob {
  // Set when this process started the ranks here (`--ranks N` outside mpirun) and is none of
  // them: the job's exit code. Nothing else is then set.
  std::optional<int> launched;
  std::string name;
  std::unique_ptr<World> world;
  int rank = 0, n = 1;
  Store* store = nullptr;              // the world's
  std::string tag;                     // "[rank N] ": begins every line this rank writes to stderr
  std::chrono::milliseconds timeout{30000};
  std::string json_path;

  // check_same_options() under "<name>/shape": every rank stops with the same message when one
  // rank's `options` differ; `what` ends it ("every rank must <what>").
  void check_same_options(const std::string& options, const std::string& what) const;
  // This rank's host record: host_info(), its rank, its communication path and its GPU.
  nlohmann::json host_record(const nlohmann::json& path, const nlohmann::json& gpu) const;
  // Publishes `self` under "<name>/meta/<rank>" and reads every rank's, in rank order, passing
  // each to `check` (which may throw) as it comes. Only rank 0 reads unless `every_rank_reads`;
  // the other ranks get an empty array.
  nlohmann::json exchange_hosts(const nlohmann::json& self, bool every_rank_reads,
                                const std::function<void(const nlohmann::json& host, int r)>& check = {}) const;
  // The metadata every command has: command (`argv`), launcher, ranks, job_id, build, hosts.
  nlohmann::json common_meta(const std::vector<std::string>& argv, const nlohmann::json& hosts) const;
  // Rank 0 writes `doc` (with "error" when `error` is not empty) to --json atomically; the
  // other ranks, and every rank without --json, nothing.
  void write_json(nlohmann::json doc, const std::string& error = "") const;
  // The end of a rank that failed with `e`: "<tag>ringbench <name>: error: <message>" on stderr,
  // rank 0's `doc` with e.what() as its "error" (or a line saying that failed too), and no
  // MPI_Finalize (it could wait for ranks that died; mpirun ends the job). Returns 1.
  int fail(const std::exception& e, const nlohmann::json& doc, const std::string& message);
};

// Starts the command: under `--ranks N` outside mpirun, its ranks here (launch_ranks_here,
// RankJob::launched); otherwise this process's rank, in the world make_command_world() makes.
RankJob start_rank_job(const CommandSpec& spec, const std::vector<std::string>& argv);

}  // namespace ringbench
