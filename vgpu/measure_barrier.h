// Makes the VMs of one `vgpu share` measure at the same time. Each VM arrives at the barrier
// when its warmup is done and waits there until every VM has arrived; after its measured steps
// it keeps the device busy with unmeasured steps until no VM is measuring any more. Every VM's
// figures therefore describe the device shared by all k VMs, however unequal their start-up
// times (a loaded or sanitized host) and their speeds.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

namespace ringbench::vgpu {

class MeasureBarrier {
 public:
  explicit MeasureBarrier(int vms);  // vms <= 1: arrive() returns at once

  // Blocks until all VMs have arrived. Throws Error after `timeout`, when a VM
  // powers off before arriving (it will never measure), or after shutdown().
  void arrive(int vm, std::chrono::milliseconds timeout);
  // `vm` has finished its measured steps; returns how many VMs are still measuring.
  int finish(int vm);
  void leave(int vm);  // `vm` powered off
  void shutdown();     // every waiting and later arrive() throws

 private:
  enum class State { waiting, measuring, finished, left };
  int count(State s) const;  // with m_ held
  bool all_arrived() const;  // with m_ held

  const int vms_;
  std::mutex m_;
  std::condition_variable cv_;
  std::map<int, State> state_;
  bool released_ = false, stopped_ = false;
};

}  // namespace ringbench::vgpu
