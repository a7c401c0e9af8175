// predict's model of a training step on a remote device (issue 41): the step on the device
// itself plus what the link adds. Per step the client moves `bytes_up` to the device and
// `bytes_down` from it in `round_trips` request/reply exchanges (the counts `train --device
// remote:...` records in meta.remote.per_step), so over a link of rate R and one-way latency L
//   step_remote = step_local + (bytes_up + bytes_down) * 8 / R + round_trips * 2 * L
// A serial model: it ignores that the gradient chunks stream down while backward still runs
// (which hides part of the bytes term) and the client's own per-request costs.
#pragma once

namespace ringbench::predict {

struct RemoteTraffic {
  double bytes_up = 0, bytes_down = 0, round_trips = 0;  // per training step
};

struct RemoteLinkModel {
  double gbps = 0;        // 0: no rate term
  double latency_us = 0;  // one way
};

// The transfer terms alone, in seconds per step.
double remote_transfer_s(const RemoteTraffic& t, const RemoteLinkModel& link);

// The predicted remote step time from the local one.
double remote_step_s(double local_step_s, const RemoteTraffic& t, const RemoteLinkModel& link);

// The fraction of local throughput kept: local step / remote step.
double remote_kept(double local_step_s, const RemoteTraffic& t, const RemoteLinkModel& link);

}  // namespace ringbench::predict
