// How this process learned its rank and world, and the store its ranks rendezvous through.
//   mpirun      - launched by mpirun: rank/size from MPI; rank 0 hosts a TCP store and
//                 broadcasts its address with MPI (MPI never carries collective data)
//   local       - `--ranks N` without mpirun: this process re-executes itself N times on
//                 this machine and hosts the store; see launch_local()
//   env         - RINGBENCH_RANK / RINGBENCH_WORLD_SIZE / RINGBENCH_STORE set (the children
//                 of a local launch, or ranks started by hand or by another launcher)
//   single      - one rank, in-process store
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collectives/store.h"

namespace ringbench {

struct WorldOptions {
  int ranks = 1;                 // --ranks: local ranks to spawn when not under mpirun
  std::string addr, iface;       // where rank 0 hosts the store (mpirun) and ranks listen
  std::string secret_file;       // --secret-file: the job's secret for ranks started by hand
  std::chrono::milliseconds timeout{30000};
};

struct World {
  int rank = 0;
  int size = 1;
  std::string launcher;          // mpirun | local | env | single
  std::string job_id;
  // The job's secret (collectives/auth.h): every store and transport connection proves it knows
  // it. Made by rank 0 under mpirun (shared over MPI) and by `--ranks N` (handed to the children
  // in their environment); ranks started by hand read RINGBENCH_SECRET or --secret-file. Empty
  // only for one rank, or ranks started by hand that are all on loopback: their store, and every
  // address they listen on (--addr, --iface), or the rank refuses to start.
  std::string secret;
  std::string default_addr = "127.0.0.1";  // address to advertise when --addr/--iface unset
  std::unique_ptr<TcpStoreServer> server;
  std::unique_ptr<Store> store;
  bool mpi = false;              // MPI was initialized (finalize at exit)
  // How long rank 0 keeps serving the store for ranks still connected when it exits: at most
  // the peer timeout, so a stopped rank (which never disconnects) cannot delay the exit more.
  std::chrono::milliseconds linger{10000};
  ~World();
};

// True when this process was started by mpirun (Open MPI, MPICH/PMI or PMIx variables).
bool launched_by_mpirun();

// Sets up the world. Throws Error with advice when the combination cannot work (e.g. --impl
// mpi without mpirun).
std::unique_ptr<World> make_world(const WorldOptions& opts, bool need_mpi);

// Throws Error when `ranks` (--ranks) is more than one machine launches (256), naming the limit.
void check_local_ranks(int ranks);

// For `--ranks N` outside mpirun: starts N copies of this executable with `args` (rank env set),
// hosts their store, forwards their output, and returns the exit code of the job: 0 when all
// ranks succeeded, else the first failing rank's code. A rank that fails makes the others
// get `grace` to report their own errors before they are killed.
// `standby_rank` >= 0: also a standby target for that rank (its args plus --migrate-standby,
// train --migrate-to standby); one still running `grace` after every rank ended (stopped, or
// hung) is killed, and the job fails.
int launch_local(int ranks, const std::vector<std::string>& args, std::chrono::milliseconds grace,
                 int standby_rank = -1);

// The job's secret as the ranks of a launch get it: the environment variable (hex).
std::string secret_env(const std::string& secret);

// Whether this process writes the job's results (--json): rank 0, as far as the launcher's
// environment tells before the world is made. Only it checks the output paths up front.
bool writes_results();

// True in a child started by launch_local (or any env-launched rank).
bool launched_by_env();

// The job's rank count as its launcher's environment gives it before the world is made
// (RINGBENCH_WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS), or 0 where none does or
// its value is no rank count (making the world then says so).
int world_size_from_env();

// A command's `--ranks N` before its ranks exist: outside mpirun and a launch, N > 1 ranks are
// started here (launch_local, each waited for at most twice `timeout` after a failure) and the
// job's exit code is returned; otherwise nothing, and this process goes on as a rank.
// `gpu_per_rank` ("--impl nccl", or "" when not) names the option whose backend needs a GPU per
// rank: more ranks than this machine has GPUs is an Error.
std::optional<int> launch_ranks_here(int ranks, const std::string& gpu_per_rank,
                                     const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                                     int standby_rank = -1);

// make_world() for a subcommand given `--ranks ranks`: rejects a --ranks that disagrees with
// the world mpirun (or the environment) made.
std::unique_ptr<World> make_command_world(const WorldOptions& opts, bool need_mpi);

// Every rank publishes `options` (what must be equal for the job to make sense) under `key`
// and compares every rank's with rank 0's, so all of them stop with the same message when one
// differs. `what` ends the message: "every rank must ...".
void check_same_options(Store& store, const std::string& key, const std::string& options,
                        int rank, int n, std::chrono::milliseconds timeout, const std::string& what);

// The value rank `sender` publishes under `key`. A wait that times out is a TimeoutError naming
// that rank (it is stopped, dead, or never got this far), on every rank that waits for it.
Bytes get_from_rank(Store& store, const std::string& key, int sender, std::chrono::milliseconds timeout);

// The JSON value rank `sender` published under `key`, parsed: the store's values come over the
// network, so one that is not JSON of the expected type is an Error naming the key and sender.
nlohmann::json get_rank_json(Store& store, const std::string& key, int sender,
                             std::chrono::milliseconds timeout,
                             nlohmann::json::value_t type = nlohmann::json::value_t::object);

}  // namespace ringbench
