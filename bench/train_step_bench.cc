// CPU training step of each model next to the sum of its oneDNN primitives' times: how much
// the framework around the primitives (reorders aside, which are primitives too; graph walk,
// loss, SGD, bookkeeping) costs. Prints a markdown table and writes JSON.
//   train_step_bench [--models a,b] [--reps N] [--json FILE]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "models/dnnl_network.h"
#include "models/network.h"
#include "models/trainer.h"
#include "models/zoo.h"

namespace m = ringbench::models;

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
struct Config {
  std::string model;
  int batch;
};
}  // namespace

int main(int argc, char** argv) {
  std::vector<Config> configs = {{"lenet", 64}, {"mobilenet_v1", 16}, {"inception_v3", 4}};
  int reps = 7;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--models") && i + 1 < argc) {
      std::vector<Config> keep;
      std::stringstream ss(argv[++i]);
      for (std::string name; std::getline(ss, name, ',');)
        for (auto& c : configs)
          if (c.model == name) keep.push_back(c);
      configs = keep;
    } else {
      std::fprintf(stderr, "usage: %s [--models lenet,mobilenet_v1,inception_v3] [--reps N] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  m::set_compute_threads(0);  // FTZ/DAZ as in ringbench train; threads as OMP_NUM_THREADS says
  nlohmann::json out = nlohmann::json::array();
  std::printf("# %d threads; medians of %d steps\n", m::compute_threads(), reps);
  std::printf("| model | batch | train step (ms) | fwd+bwd (ms) | sum of primitives in the step (ms) | "
              "overhead vs in-step sum | sum of primitives alone (ms) | fwd+bwd vs alone sum |\n"
              "|---|---|---|---|---|---|---|---|\n");
  for (const auto& c : configs) {
    const m::Graph g = m::build_model(c.model);
    std::vector<double> step, compute;
    {
      auto net = m::make_network("onednn", g, c.batch);
      m::Trainer t(*net, {}, nullptr);
      auto src = m::make_synthetic_source(g.input_dims(), g.output_node().out.c, c.batch, 1, 0);
      for (int i = 0; i < 2; ++i) t.step(*src);  // warm up
      for (int i = 0; i < reps; ++i) {
        auto r = t.step(*src);
        step.push_back(r.step_s);
        compute.push_back(r.compute_s);
      }
    }
    const auto prims = m::profile_onednn_primitives(g, c.batch, reps);
    double in_step = 0, alone = 0;
    for (const auto& p : prims) {
      in_step += p.in_step_seconds;
      alone += p.seconds;
    }
    const double st = median(step), co = median(compute);
    std::printf("| %s | %d | %.1f | %.1f | %.1f | %+.1f%% | %.1f | %+.1f%% |\n", c.model.c_str(), c.batch,
                st * 1e3, co * 1e3, in_step * 1e3, 100 * (co / in_step - 1), alone * 1e3,
                100 * (co / alone - 1));
    std::fflush(stdout);
    out.push_back({{"model", c.model}, {"batch", c.batch}, {"step_s", step}, {"compute_s", compute},
                   {"primitives", prims.size()}, {"sum_in_step_s", in_step}, {"sum_alone_s", alone}});
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  return 0;
}
