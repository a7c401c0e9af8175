#include "runner/predict/step_sim.h"

#include <algorithm>

namespace ringbench::predict {

StepPrediction simulate_step(const StepTimeline& t, const std::function<double(double bytes)>& allreduce_s,
                             bool overlap) {
  StepPrediction p;
  double total_bytes = 0;
  for (const auto& b : t.buckets) total_bytes += b.bytes;
  double channel = 0, clock = t.compute_s;
  for (const auto& b : t.buckets) {
    const double start = std::max(channel, overlap ? b.ready_s : std::max(b.ready_s, t.compute_s));
    channel = start + allreduce_s(b.bytes);
    p.exposed_s += std::max(0.0, channel - clock);
    clock = std::max(clock, channel) + t.optimizer_s * (total_bytes > 0 ? b.bytes / total_bytes : 0);
  }
  if (t.buckets.empty()) clock += t.optimizer_s;
  p.comm_end_s = channel;
  p.step_s = clock;
  return p;
}

}  // namespace ringbench::predict
