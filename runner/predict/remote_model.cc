#include "runner/predict/remote_model.h"

#include <algorithm>

namespace ringbench::predict {

double remote_transfer_s(const RemoteStep& s, const RemoteTraffic& t, const RemoteLinkModel& link) {
  const double bits_s = link.gbps * 1e9;
  const double up_s = bits_s > 0 ? t.bytes_up * 8 / bits_s : 0, down_s = bits_s > 0 ? t.bytes_down * 8 / bits_s : 0;
  return up_s + std::max(0.0, down_s - s.backward_s) + t.round_trips * 2 * link.latency_us * 1e-6;
}

double remote_step_s(const RemoteStep& s, const RemoteTraffic& t, const RemoteLinkModel& link) {
  return s.base_s + remote_transfer_s(s, t, link);
}

double remote_kept(const RemoteStep& s, const RemoteTraffic& t, const RemoteLinkModel& link) {
  return s.base_s / remote_step_s(s, t, link);
}

}  // namespace ringbench::predict
