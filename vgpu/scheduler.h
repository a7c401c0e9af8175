// An emulated vGPU time-slice scheduler: k VMs share one device, and only the VM holding the
// current slice may run device work. NVIDIA's three policies (slice_policy.h):
//  - best_effort: the slice rotates among VMs that have work; an idle VM yields its slot, and
//    a VM alone gets the whole device;
//  - equal_share: the slice rotates among all powered-on VMs, with work or not, so each gets
//    1/(VMs on) of the time;
//  - fixed_share: the slice rotates among max_instances slots whether VMs are on or not, so
//    each VM gets 1/max_instances of the time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "models/device_gate.h"
#include "vgpu/slice_policy.h"

namespace ringbench::vgpu {

const char* policy_name(Policy p);     // "best_effort", ...
Policy parse_policy(const std::string& s);  // throws std::invalid_argument listing the names

// In-process and thread-safe; SchedulerServer puts it behind a Unix socket for jobs that are
// separate processes.
class SliceScheduler {
 public:
  explicit SliceScheduler(SchedulerOptions o);
  ~SliceScheduler();
  const SchedulerOptions& options() const;
  Clock::time_point epoch() const;  // slot 0 of equal and fixed share starts here

  int power_on();          // a VM joins; returns its id (its fixed-share slot); throws when all are on
  void power_off(int vm);  // releases the device if it holds it
  // Blocks until `vm` may run device work and returns when its slice ends. Throws
  // Error after `timeout`, when `vm` is powered off meanwhile, or after
  // shutdown(); the holder asking again gets its current grant end back.
  Clock::time_point acquire(int vm, std::chrono::milliseconds timeout);
  void release(int vm);  // a VM that does not hold the device: nothing happens
  // Every waiting and later acquire() throws (SchedulerServer's teardown).
  void shutdown();

  // Held time of every VM within [from, to] (clipped), summed; and per VM. A hold runs from
  // when the policy granted it (a release handing over, or the start of a slot the VM waited
  // for), which may be before the VM's thread woke up, to release. One still in progress
  // counts up to now; intervals() lists the finished ones in grant order.
  double busy_seconds(Clock::time_point from, Clock::time_point to) const;
  double busy_seconds(int vm, Clock::time_point from, Clock::time_point to) const;
  std::vector<BusyInterval> intervals() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// A DeviceGate over an in-process scheduler (tests, and threads as VMs). Misuse is harmless:
// enter() while inside, and leave() or checkpoint() outside, do nothing. One thread drives a
// gate; usage() may be read from any thread.
std::unique_ptr<models::DeviceGate> make_local_gate(SliceScheduler& s, int vm,
                                                    std::chrono::milliseconds timeout);

// The scheduler behind a Unix socket: each connection is a VM (powered on while connected).
// With measuring_vms > 1 the VMs' gates also measure together (MeasureBarrier): their
// begin_measuring() waits for that many VMs, and others_measuring() says whether one still
// measures.
class SchedulerServer {
 public:
  SchedulerServer(const std::string& socket_path, SchedulerOptions o, int measuring_vms = 0);
  ~SchedulerServer();  // stops serving and removes the socket
  const std::string& path() const;
  SliceScheduler& scheduler();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A DeviceGate that asks a SchedulerServer for slices. Connecting powers the VM on; errors
// (server gone, timeout) throw Error naming the socket; the gate is then closed
// (its VM powered off) and a later enter() throws again. Misuse as for make_local_gate.
std::unique_ptr<models::DeviceGate> connect_gate(const std::string& socket_path,
                                                 std::chrono::milliseconds timeout);

}  // namespace ringbench::vgpu
