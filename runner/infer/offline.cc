// Offline: every sample available at once, issued in batches of B back to back.
#include <string>

#include "base/errors.h"
#include "runner/infer/loadgen.h"

namespace ringbench::infer {

OfflineResult run_offline(InferTarget& target, Clock& clock, int batch, const RunRules& rules) {
  rules.check();
  if (batch == 0) batch = target.max_batch();
  if (batch < 1 || batch > target.max_batch())
    throw Error("Offline: batch " + std::to_string(batch) + " is not in [1, " + std::to_string(target.max_batch()) +
                "], the target's range");
  OfflineResult r;
  r.batch = batch;
  const double t0 = clock.now_s();
  bool capped = false;
  while (!(r.batches > 0 && r.samples >= rules.min_count && clock.now_s() - t0 >= rules.min_duration_s)) {
    if (clock.now_s() - t0 >= rules.max_duration_s) {
      capped = true;
      break;
    }
    target.run(batch);
    ++r.batches;
    r.samples += batch;
  }
  r.duration_s = clock.now_s() - t0;
  r.samples_per_s = r.duration_s > 0 ? static_cast<double>(r.samples) / r.duration_s : 0;
  r.validity = check_loadgen_rules(Scenario::Offline, rules, {r.duration_s, r.samples, capped});
  return r;
}

OfflineSweep sweep_offline(InferTarget& target, Clock& clock, const std::vector<int>& batches, const RunRules& rules) {
  OfflineSweep sweep;
  for (int b : batches) sweep.points.push_back(run_offline(target, clock, b, rules));
  return sweep;
}

}  // namespace ringbench::infer
