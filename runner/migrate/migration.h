// Live migration of one training rank from node A to node B during a training point, as
// vMotion moves a vGPU VM: the rank's framebuffer (emulated where there is no GPU) is copied to
// a new process on B, by stop-and-copy or by pre-copy rounds while the rank trains on; then the
// rank is stunned, the rest is copied, and the ring re-forms with B in the rank's place (a new
// rendezvous epoch of the store). The other ranks wait at the step boundary meanwhile.
//
// Every rank learns at each step boundary from the migration's start whether the rank stuns
// there: the source publishes "go" or "stun" under the step's key, the others wait for it as
// they would for the rank's gradients (bounded by the peer timeout). A failed copy (the
// target unreachable, its process killed) resumes the rank on A: the ring re-forms with it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectives/store.h"
#include "models/data.h"
#include "models/trainer.h"
#include "runner/migrate/copier.h"
#include "runner/migrate/migrate_args.h"
#include "runner/migrate/rank_state.h"
#include "runner/migrate/source_gate.h"
#include "runner/migrate/wire.h"

namespace ringbench::migrate {

struct MigratePlan {
  int64_t at_step = 0, total_steps = 0;
  int rank = 0;
  CopyPolicy policy;
  std::string netns, fault;
  std::vector<int> cpus;  // the target's CPUs (empty: the source's)
  bool standby = false;   // the target is a standby started with the job (--migrate-to standby)
  uint64_t framebuffer_bytes = 0;
  bool enabled() const { return at_step > 0; }
  std::string method() const { return policy.precopy ? "precopy" : "stopcopy"; }
};
// Checks `a` against the job; `profile_bytes`: the vGPU profile's framebuffer (0: none).
MigratePlan make_plan(const MigrateArgs& a, int ranks, int64_t warmup, int64_t total_steps, uint64_t profile_bytes,
                      size_t state_bytes);

// How the migration re-forms the job's ring: drop its communicator; make one for an epoch and
// connect the trainer's reducer to it.
struct RingHooks {
  std::function<void()> drop;
  std::function<void(int epoch)> form;
};

struct RankSide {
  Store& store;
  int rank = 0;
  std::chrono::milliseconds timeout;
  std::string secret, local_addr;
  std::vector<std::string> argv;  // the target's command line: this rank's
};

// Rank 0's Chrome trace: the migration's phases (pre-copy, stun copy, resume) on a track of their own.
void trace_migration(const nlohmann::json& result, models::Timeline& tl);

class Migration {
 public:
  enum class Role { other, source, target };
  Migration(const MigratePlan& plan, Role role, RankSide side, RingHooks ring, const StateLayout& layout);
  ~Migration();

  // Before step `s` (0-based, warmup included): train on, or (the source, once moved) leave:
  // the rank lives on in its target. `loop`: what the rank has done so far.
  enum class Next { train, leave };
  Next before_step(int64_t s, models::Trainer& t, const LoopState& loop);
  // After a step: the source writes its framebuffer (from the migration's start).
  void after_step(int64_t s, const models::Trainer& t);
  // The target: receives the rank, restores it and joins the ring; returns where to go on. A
  // standby (--migrate-to standby) first waits for its source: nothing when the rank stays.
  std::optional<LoopState> arrive(models::Trainer& t, models::BatchSource& data, int64_t total_steps, size_t buckets);
  // Seconds the last before_step() (or arrive()) kept this rank from training: added to the step.
  double take_wait_s();
  // The source after leaving: waits for the target it started, returns its exit code (0 for a standby).
  int wait_for_target();
  // Rank 0 at the end: what happened (the source's report, the ring's stall, the rank's downtime).
  nlohmann::json result(std::chrono::milliseconds timeout) const;

 private:
  void start(const models::Trainer& t);
  Next stun(const LoopState& loop);
  void wait_outcome();
  std::pair<std::string, int> standby_address() const;
  bool rank_stayed(std::chrono::milliseconds wait);
  int accept_from_source(int listen_fd, const StreamShape& shape);
  nlohmann::json source_report(const std::string& error) const;

  MigratePlan plan_;
  Role role_;
  RankSide side_;
  RingHooks ring_;
  StateLayout layout_;
  std::unique_ptr<Framebuffer> fb_;
  std::unique_ptr<Copier> copier_;
  std::vector<char> scratch_;
  pid_t target_pid_ = -1;
  std::string target_addr_;
  bool started_ = false, done_ = false;
  bool forced_ = false;  // stunned at the run's last step, before the copy was ready to
  int64_t start_ns_ = 0, stun_ns_ = 0, stored_ns_ = 0;
  double wait_s_ = 0, stall_s_ = 0;
  nlohmann::json outcome_;
  SourceRefusals refused_;  // the target's: connections that did not prove the job's secret
};

}  // namespace ringbench::migrate
