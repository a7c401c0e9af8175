// This process's CPU time, the one reader every CPU figure uses (train's cpu_s, allreduce's
// cpu_us, data's decode cost, autotune's probe, tests that a server does not spin).
#pragma once

#include <time.h>

namespace ringbench {

// All threads' CPU seconds. The kernel adds the time of a thread running on another CPU at its
// next tick, so a difference over one short step can be off by a tick or so; over a whole run it
// is exact to that much at either end. Reads as 0 where the clock is missing (not Linux).
inline double process_cpu_seconds() {
  timespec ts{};
  if (::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace ringbench
