// What the in-process and the socket gates share: a DeviceGate over "ask for a slice" and
// "give the device up", with the accounting of held and waited time. Only the thread that
// drives the gate calls enter/checkpoint/leave; usage() may be read from another thread.
#pragma once

#include <chrono>
#include <mutex>

#include "models/device_gate.h"
#include "vgpu/scheduler.h"

namespace ringbench::vgpu {

class SlicedGate : public models::DeviceGate {
 public:
  void enter() override {
    if (!inside_) grab();
  }
  void checkpoint() override {  // only a clock read while the slice lasts
    if (inside_ && Clock::now() >= end_) {
      drop();
      grab();
    }
  }
  void leave() override {
    if (inside_) drop();
  }
  Usage usage() const override {
    std::lock_guard lock(m_);
    return u_;
  }

 protected:
  virtual Clock::time_point request() = 0;  // blocks until granted; returns the slice's end
  virtual void give_back() = 0;
  bool inside_ = false;

 private:
  static double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
  void grab() {
    const auto t0 = Clock::now();
    end_ = request();
    since_ = Clock::now();
    inside_ = true;
    std::lock_guard lock(m_);
    u_.waited_s += seconds(since_ - t0);
    ++u_.slices;
  }
  void drop() {
    const auto t = Clock::now();
    inside_ = false;
    {
      std::lock_guard lock(m_);
      u_.held_s += seconds(t - since_);
    }
    give_back();
  }

  Clock::time_point end_, since_;
  mutable std::mutex m_;  // guards u_
  Usage u_;
};

}  // namespace ringbench::vgpu
