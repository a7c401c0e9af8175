// The clocks the inference scenarios read and wait on. A scenario asks the clock for the time and
// sleeps on it; it never reads std::chrono itself, so that a test can run it on VirtualClock: time
// moves only when someone says so (a fake target's run(batch) advancing it by a known service
// time, the scenario's own waits jumping to their deadline), and every latency is exact.
#pragma once

namespace ringbench::infer {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now_s() const = 0;          // seconds from an arbitrary, fixed origin
  virtual void sleep_until_s(double t) = 0;  // returns at once when t has passed
};

// std::chrono::steady_clock, its origin at construction.
class SteadyClock : public Clock {
 public:
  SteadyClock();
  double now_s() const override;
  void sleep_until_s(double t) override;

 private:
  double origin_s_;
};

// Simulated time, starting at `start_s`: sleep_until_s(t) jumps to t (never backwards);
// advance_s(d) is the work of a fake target.
class VirtualClock : public Clock {
 public:
  explicit VirtualClock(double start_s = 0) : now_(start_s) {}
  double now_s() const override { return now_; }
  void sleep_until_s(double t) override;
  void advance_s(double d);  // Error for a negative d

 private:
  double now_;
};

}  // namespace ringbench::infer
