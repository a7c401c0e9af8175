// predict's model of a training step on a remote device (issue 41): a step without the link plus
// what the link adds. Per step the client moves `bytes_up` to the device and `bytes_down` from
// it in `round_trips` request/reply exchanges (the counts `train --device remote:...` records in
// meta.remote.per_step). Over a link of rate R and one-way latency L:
//   step_remote = step_base + bytes_up * 8 / R + max(0, bytes_down * 8 / R - backward)
//                 + round_trips * 2 * L
// The parameters go up before forward, serially; the gradients come down layer by layer as
// backward produces them, so their transfer hides behind the backward pass (`backward_s`) and
// only what outlasts it adds. step_base is the step on the device itself (the local device), or
// through the device server with no link (loopback: the remote path's own costs included).
#pragma once

namespace ringbench::predict {

struct RemoteTraffic {
  double bytes_up = 0, bytes_down = 0, round_trips = 0;  // per training step
};

struct RemoteStep {
  double base_s = 0;      // the step without the link
  double backward_s = 0;  // the backward pass the gradients' transfer overlaps (0: none)
};

struct RemoteLinkModel {
  double gbps = 0;        // 0: no rate term
  double latency_us = 0;  // one way
};

// What the link adds to a step, in seconds.
double remote_transfer_s(const RemoteStep& s, const RemoteTraffic& t, const RemoteLinkModel& link);

// The predicted remote step time.
double remote_step_s(const RemoteStep& s, const RemoteTraffic& t, const RemoteLinkModel& link);

// The fraction of the base's throughput kept: base step / remote step.
double remote_kept(const RemoteStep& s, const RemoteTraffic& t, const RemoteLinkModel& link);

}  // namespace ringbench::predict
