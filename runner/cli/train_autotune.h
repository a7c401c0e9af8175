// `train --autotune` in a job: wires tune::autotune (runner/tune/autotune.h) to the job's
// trainer, ring and store, and says what it chose.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>

#include "models/data.h"
#include "models/trainer.h"
#include "runner/backends/backend.h"
#include "runner/cli/command.h"
#include "runner/cli/train_cmd.h"

namespace ringbench {

// The checks that need no job: options --autotune cannot go with (Error naming them).
void validate_autotune_args(const TrainArgs& a);

struct AutotuneHooks {
  const RankJob& job;
  const TrainArgs& a;
  models::Trainer& trainer;
  Communicator* comm;  // none with one rank (an error)
  models::BatchSource& source;
  std::function<models::ReducerFactory(const TrainArgs&)> reducers;  // the gradient reducers of `a`'s wire type
  int threads = 1;  // this rank's compute threads on the CPU (tune's CPU term); 0 where a device computes
};

// Searches, leaves the job on the chosen setting, writes --autotune-log (rank 0) and returns
// `a` with the chosen knobs; `record` gets the search (AutotuneResult::to_json()).
TrainArgs autotune_job(const AutotuneHooks& h, nlohmann::json& record);

}  // namespace ringbench
