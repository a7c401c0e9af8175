#include "runner/predict/remote_model.h"

namespace ringbench::predict {

double remote_transfer_s(const RemoteTraffic& t, const RemoteLinkModel& link) {
  const double bytes_s = link.gbps > 0 ? (t.bytes_up + t.bytes_down) * 8 / (link.gbps * 1e9) : 0;
  return bytes_s + t.round_trips * 2 * link.latency_us * 1e-6;
}

double remote_step_s(double local_step_s, const RemoteTraffic& t, const RemoteLinkModel& link) {
  return local_step_s + remote_transfer_s(t, link);
}

double remote_kept(double local_step_s, const RemoteTraffic& t, const RemoteLinkModel& link) {
  return local_step_s / remote_step_s(local_step_s, t, link);
}

}  // namespace ringbench::predict
