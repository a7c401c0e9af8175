// The options of `train` that migrate a rank during the run (runner/migrate/migration.h).
#pragma once

#include <cstdint>
#include <string>

namespace ringbench::migrate {

// `train --migrate-*`.
struct MigrateArgs {
  int64_t at_step = 0;        // the migration starts once this many steps (warmup included) are done; 0: none
  int rank = -1;              // -1: the last
  std::string method = "precopy";
  // Where the target comes from: "local", a process this rank starts (on this host, or in
  // --migrate-netns); "standby", one the job's launcher started on node B with the job
  // (--migrate-standby), as a destination host is ready before vMotion begins.
  std::string to = "local";
  bool standby = false;       // this process is that standby
  std::string netns;          // node B's network namespace ("": this host)
  std::string cpus;           // node B's CPUs, e.g. "2,3" or "2-3" ("": the source's affinity)
  std::string framebuffer;    // bytes ("": the vGPU profile's, else the state's size)
  std::string fault;          // "", "target-unreachable", "target-killed", "source-killed" (tests)
};

// The rank that moves in a job of `ranks`: --migrate-rank, or the last.
inline int moving_rank(const MigrateArgs& a, int ranks) { return a.rank < 0 ? ranks - 1 : a.rank; }

}  // namespace ringbench::migrate
