// `ringbench predict RUN_DIR --what-if FILE.yaml`: the measured hardware replaced by a described
// one. Each transport is a link rate, the fraction of it large messages reach, a per-message
// latency and a host CPU cost per byte; each model a compute time per step on the described
// GPU. The models' timelines (bucket sizes, when backward releases each bucket) come from
// RUN_DIR's one-rank points, scaled to the described compute time. Every number carries its
// source: "published: <document>", "derived: <how, from what>", "measured: <ringbench run
// directory>" or "assumed: <why there is no better number>".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runner/predict/predictions.h"

namespace ringbench {
class YamlReader;
}

namespace ringbench::predict {

// The most nodes a what-if predicts for (nodes and check_nodes).
constexpr int kMaxWhatIfNodes = 1 << 20;

struct Sourced {
  double value = 0;
  std::string source;
};

// parent[k] as {value, source}: the value within [min, max], the source starting with published:,
// derived:, measured: or assumed: and saying what; an Error naming the key otherwise.
Sourced read_sourced(const YamlReader& parent, const std::string& k, double min, double max);

struct WhatIfTransport {
  std::string name;
  Sourced link_gbps, efficiency, latency_us, cpu_ns_per_byte;
  LinkCost cost(double link_gbps_override = 0) const;  // α = latency, β = wire + CPU per byte
};

struct WhatIfModel {
  std::string model;
  int batch = 0;            // per rank; picks RUN_DIR's one-rank point of this batch, if any
  Sourced compute_s;        // forward + backward per step on the described GPU
  std::optional<Sourced> optimizer_s;  // default: the measured one, scaled like compute
  // The gradients' type on the wire: "fp32", or "fp16"/"bf16" (mixed precision, or
  // --compression): the measured buckets' bytes (fp32) times 2/4.
  std::string gradient_wire = "fp32";
};

struct WhatIf {
  std::string name, origin, description;
  std::vector<WhatIfTransport> transports;  // the first is compared with `baseline`
  std::string baseline;
  std::vector<WhatIfModel> models;
  std::vector<int> nodes;       // the curve's N
  int check_nodes = 4;          // the N of the conditions grid
  std::vector<double> grid_link_gbps, grid_compute_scale;
};

WhatIf parse_what_if(const std::string& text, const std::string& origin);
WhatIf load_what_if(const std::string& path);

// One model under the described hardware: its scaled timeline and a curve per transport.
struct WhatIfResult {
  const WhatIfModel* model = nullptr;
  const report::Point* timeline_from = nullptr;
  StepTimeline timeline;
  std::vector<LinkCurve> links;  // in the file's order
  // ratio[i][j]: efficiency of transports[0] / baseline at check_nodes, link grid_link_gbps[i],
  // compute time grid_compute_scale[j] x the described one.
  std::vector<std::vector<double>> ratio;
};

// The results point into `w` and `run`: both must outlive them.
std::vector<WhatIfResult> run_what_if(const WhatIf& w, const report::Run& run);

std::string md_what_if(const WhatIf& w, const std::vector<WhatIfResult>& results);

}  // namespace ringbench::predict
