// Ranks started by Slurm's srun without PMI (srun's default, --mpi=none): rank and size come from
// SLURM_PROCID and SLURM_STEP_NUM_TASKS, and the job rendezvous through a store that rank 0
// serves on the step's first node, at a port derived from the job and step ids (so every task
// computes the same address without a channel). Under `srun --mpi=pmix` PMIX_RANK is set and
// the mpirun path (MPI over PMIx) applies instead.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ringbench {

// True inside a task of an srun step (SLURM_STEP_NUM_TASKS is srun's; a batch script has none).
bool launched_by_slurm();

// The first host of a Slurm hostlist: "node[03-05,9],gpu1" -> "node03".
std::string slurm_first_host(const std::string& hostlist);

// The store's port of a step: 20000 + (job * 64 + step) mod 20000, unless RINGBENCH_SLURM_PORT.
int slurm_store_port(long job_id, long step_id);

// The RINGBENCH_* variables that make this task a rank of the env launcher (world.h): rank,
// world size, store (127.0.0.1 on a one-node step, else the first node), job id, and
// RINGBENCH_STORE_SERVE on rank 0. `env` is the task's environment; a variable it already has
// (RINGBENCH_STORE set by hand) is kept. Error naming the variable when Slurm's are malformed.
std::map<std::string, std::string> slurm_rank_env(const std::map<std::string, std::string>& env);

// Sets those variables in this process's environment for as long as it lives, so that the
// world is made as the env launcher's; then unsets them, so that the processes this rank starts
// (a sweep's points, the MPI baseline's mpirun) do not take them for their own.
class SlurmRankEnv {
 public:
  SlurmRankEnv();
  ~SlurmRankEnv();
  SlurmRankEnv(const SlurmRankEnv&) = delete;
  SlurmRankEnv& operator=(const SlurmRankEnv&) = delete;

 private:
  std::vector<std::string> set_;
};

// How many tasks of the step run on this node (SLURM_STEP_TASKS_PER_NODE, e.g. "2(x3),1", at
// SLURM_NODEID); 1 when unknown.
int slurm_tasks_on_this_node();

}  // namespace ringbench
