#include "collectives/transport/core/transport_core.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>

namespace ringbench::transport_core {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

void signal_eventfd(int fd) {
  const uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(fd, &one, sizeof one);
}

std::string fmt_s(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", s);
  return b;
}

TimeoutError timeout_error(const std::string& me, const std::string& who, const ReqState& r,
                           milliseconds waited, double heard_s, milliseconds alive_within,
                           const std::string& progress, bool stalled) {
  const std::string peer_state = heard_s < seconds(alive_within) ? "is alive (heard from " + fmt_s(heard_s) + " ago)"
                                                                  : "was last heard from " + fmt_s(heard_s) + " ago";
  return TimeoutError(r.peer, me + ": timed out after " + fmt_s(seconds(waited)) + " waiting to " +
                                  (r.is_send ? "send " : "receive ") + std::to_string(r.length) + " bytes " +
                                  (r.is_send ? "to " : "from ") + who + progress + "; the peer " + peer_state +
                                  " but " +
                                  (stalled ? std::string("the transfer stalled")
                                           : std::string("not ") + (r.is_send ? "receiving" : "sending")) +
                                  ": is it running the same collective?");
}

}  // namespace ringbench::transport_core
