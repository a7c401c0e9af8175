// `ringbench tune CONFIG | --model M --transport T ...`: model-guided tuning of training's
// communication knobs (fusion_mb, first_bucket_mb, compression, segment). A short probe (one
// unfused one-rank timeline per model, one allreduce size sweep per N), predict's α-β fit and
// step simulator to rank every candidate setting, then the top k and train's defaults measured
// alternately with repeats. Prints the chosen setting, predicted against measured img/s, the
// speed-up over the defaults and the search's wall time; writes tune.json beside the runs.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ringbench {

struct SweepConfig;

struct TuneArgs {
  std::string config;  // a sweep config: cluster, nodes, transports, train models, and the knobs' lists
  // Without a config: one model on a local or emulated cluster over the grid.
  std::string model, transport = "tcp", cluster = "local", link = "1gbit";
  int batch = 32, image_size = 0, steps = 20, warmup = 3;
  std::vector<int> nodes{2};
  int top_k = 3, repeats = 3, probe_steps = 10;
  std::string out;  // default: results/tune-<name>-<UTC time>
};

void add_tune_options(CLI::App& cmd, TuneArgs& a);

// The one-rank timeline probe: each model at N=1, nothing fused (a bucket per tensor, with the time
// backward released it), on as many cores as a node of the smallest N >= 2 gets (the compute the
// ranks will have: on 2 cores, N=2 gives each node 1, where N=1 alone would get 2).
SweepConfig timeline_probe(const SweepConfig& c, int steps);
int run_tune(const TuneArgs& a);

}  // namespace ringbench
