// Gates a training job's device work into the time slices an emulated vGPU scheduler grants
// it (vgpu/scheduler.h). The trainer enters before forward and leaves when backward and the
// optimizer are done; backends call checkpoint() between layers, which gives the device up
// and waits for the next slice once the current one has ended (a real GPU preempts inside a
// kernel; we can only preempt between layers, so a slice may overrun by one layer).
#pragma once

#include <cstdint>

namespace ringbench::models {

class DeviceGate {
 public:
  virtual ~DeviceGate() = default;
  virtual void enter() = 0;       // blocks until this job holds the device
  virtual void checkpoint() = 0;  // between device ops, while holding it
  virtual void leave() = 0;       // no device work for now: best effort hands the slot on
  struct Usage {
    double held_s = 0;    // time this job held the device (its device work plus overruns)
    double waited_s = 0;  // time it waited for a slice
    int64_t slices = 0;   // grants received
  };
  virtual Usage usage() const = 0;  // cumulative since construction

  // Jobs sharing one device measure together (`vgpu share`): begin_measuring() blocks until
  // every job sharing the device is about to measure; after its measured steps a job keeps
  // the device busy with unmeasured steps while others_measuring(). A gate of a job that does
  // not share (or a scheduler that does not coordinate measuring) neither waits nor asks.
  virtual void begin_measuring() {}
  virtual bool others_measuring() { return false; }
};

// Holds the device for a scope (one inference batch's forward pass): enter() when made, leave()
// however the scope ends, so that an error while holding it cannot starve the other VMs. A null
// gate does nothing.
class HoldDevice {
 public:
  explicit HoldDevice(DeviceGate* g) : g_(g) {
    if (g_) g_->enter();
  }
  ~HoldDevice() {
    try {
      if (g_) g_->leave();
    } catch (...) {  // a closed gate: the next enter() says why
    }
  }
  HoldDevice(const HoldDevice&) = delete;
  HoldDevice& operator=(const HoldDevice&) = delete;

 private:
  DeviceGate* g_;
};

}  // namespace ringbench::models
