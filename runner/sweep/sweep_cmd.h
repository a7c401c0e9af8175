// `ringbench sweep CONFIG`: runs every point of a sweep config (models × node counts ×
// transports × profiles × repeats, and allreduce size sweeps) on a local, emulated or real
// (mpirun) cluster, appending each point's result to RUN_DIR/raw.jsonl as it finishes, and
// writes the report. `--resume RUN_DIR` runs only what is not done yet.
#pragma once

#include <string>
#include <vector>

namespace ringbench {

struct SweepArgs {
  std::string config;              // CONFIG (YAML)
  std::string resume;              // RUN_DIR of an interrupted sweep
  std::string out;                 // RUN_DIR to create (default: RESULTS/<name>-<UTC time>)
  std::string results = "results";
  bool dry_run = false;
};

int run_sweep(const SweepArgs& a, const std::vector<std::string>& argv);

}  // namespace ringbench
