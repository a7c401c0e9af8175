// Where a training step's time goes, layer by layer: the forward and backward span of every
// node over a few profiled steps (medians), summed per kind of layer ("conv 3x3 depthwise",
// "batchnorm", ...), with the arithmetic rate of the convolutions and fully connected layers.
// Fed by Network::set_trace; a GPU backend waits for each layer while traced, so the spans do
// not overlap and the profiled steps are slower than unprofiled ones.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/graph.h"
#include "models/network.h"

namespace ringbench::models {

// "conv 3x3", "conv 1x7", "conv 3x3 depthwise", "conv 3x3 grouped"; op_name() for the rest.
std::string layer_kind(const Graph& g, int node);
// Multiply-adds x 2 of a conv or fc node's forward at this batch (0 for the other kinds);
// backward (data and weight gradients) does twice this.
double forward_flops(const Graph& g, int node, int batch);

class LayerProfile {
 public:
  LayerProfile(const Graph& g, int batch);
  void add(int node, Phase phase, double seconds);  // a node's span in the current step
  void end_step(double step_s);                     // closes the current step

  struct Row {
    std::string name, kind;  // a layer, or a kind (name empty) in kinds()
    int layers = 1;
    double forward_s = 0, backward_s = 0;  // medians over the steps (kinds: sums of the layers')
    double flops = 0;                      // forward + backward, one step
    double total_s() const { return forward_s + backward_s; }
  };
  int steps() const { return int(step_s_.size()); }
  double step_s() const;               // median
  std::vector<Row> layers() const;     // graph order, the input left out
  std::vector<Row> kinds() const;      // largest total first
  nlohmann::json to_json() const;
  // The kinds table and the `top` slowest layers, '#'-prefixed lines.
  std::string to_text(int top = 10) const;

 private:
  const Graph& g_;
  int batch_;
  std::vector<std::vector<double>> fwd_, bwd_;  // per node: one span per step
  std::vector<double> cur_fwd_, cur_bwd_;
  std::vector<double> step_s_;
};

}  // namespace ringbench::models
