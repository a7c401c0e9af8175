// `ringbench predict RUN_DIR`: the allreduce cost fitted from a run's collectives points, and
// every train point's step as the model predicts it against the measured one.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace ringbench {

struct PredictArgs {
  std::string run_dir;
  std::string json_path;  // "": no JSON
  int max_nodes = 1024;
  std::string algo_table;  // "": no cost table
  std::string what_if;    // a what-if file: its predictions instead of the run's
};

void add_predict_options(CLI::App& cmd, PredictArgs& a);

int run_predict(const PredictArgs& a);

}  // namespace ringbench
