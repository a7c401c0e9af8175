#include "runner/infer/clock.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "base/errors.h"

namespace ringbench::infer {

namespace {
double steady_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

SteadyClock::SteadyClock() : origin_s_(steady_s()) {}

double SteadyClock::now_s() const { return steady_s() - origin_s_; }

void SteadyClock::sleep_until_s(double t) {
  const double wait = t - now_s();
  if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
}

void VirtualClock::sleep_until_s(double t) { now_ = std::max(now_, t); }

void VirtualClock::advance_s(double d) {
  if (!(d >= 0)) throw Error("VirtualClock: cannot advance by " + std::to_string(d) + " s");
  now_ += d;
}

}  // namespace ringbench::infer
