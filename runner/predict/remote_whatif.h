// `ringbench predict RUN_DIR --what-if FILE.yaml` with a `remote:` file: the question VMware's
// Bitfusion study asks, for described servers (a GPU's compute per step, every number sourced as
// in whatif.h) and transports (the fraction of the link rate a transfer reaches, the stack's own
// latency per message): at which link rate and one-way latency does training through a remote
// device keep a fraction (90%) of its local throughput? The traffic per step (bytes each way,
// round trips) is what RUN_DIR's remote points counted for the model (runner/sweep/remote_sweep.h),
// and the step is predict's remote model (remote_model.h).
#pragma once

#include <string>
#include <vector>

#include "runner/predict/remote_model.h"
#include "runner/predict/whatif.h"

namespace ringbench::report {
struct Run;
}

namespace ringbench::predict {

struct RemoteWhatIfModel {
  std::string model;
  int batch = 0;
  Sourced step_s;          // the local step (forward, backward, optimizer) on the described GPU
  Sourced backward_share;  // the share of it that is backward, which the gradients' transfer overlaps
  Sourced input_bytes;     // bytes of a step's input batch sent up (0: data already on the device)
};

struct RemoteWhatIfServer {
  std::string name;
  std::vector<RemoteWhatIfModel> models;
};

struct RemoteWhatIfTransport {
  std::string name;
  Sourced efficiency;  // the fraction of the link rate large transfers reach
  Sourced latency_us;  // the stack's own one-way latency per message, on top of the link's
};

struct RemoteWhatIf {
  std::string name, origin, description;
  double keep = 0.9;
  std::vector<RemoteWhatIfServer> servers;
  std::vector<RemoteWhatIfTransport> transports;
  std::vector<double> grid_link_gbps{1, 10, 25, 40, 100, 200}, grid_latency_us{5, 10, 25, 50, 100, 250, 500};
};

// Whether a what-if file is a remote one (it has a `remote:` section).
bool is_remote_what_if(const std::string& text);
RemoteWhatIf parse_remote_what_if(const std::string& text, const std::string& origin);

// The traffic per step RUN_DIR's remote points counted for `model` (medians over their ok
// repeats); an Error naming the model when the run has none.
RemoteTraffic measured_traffic(const report::Run& run, const std::string& model);

// The lowest link rate (Gbit/s) at which `kept` reaches `keep` at one-way link latency
// latency_us; 0 when no rate does (the latency alone costs more).
double rate_to_keep(const RemoteStep& s, const RemoteTraffic& t, double efficiency, double latency_us, double keep);
// The highest one-way link latency (us) at which `kept` reaches `keep` at link rate gbps; < 0 when
// none does.
double latency_to_keep(const RemoteStep& s, const RemoteTraffic& t, double efficiency, double gbps,
                       double stack_latency_us, double keep);

std::string md_remote_what_if(const RemoteWhatIf& w, const report::Run& run);

}  // namespace ringbench::predict
