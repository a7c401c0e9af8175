// What a device server shares among its clients: the compute device (a CUDA GPU, or the CPU
// backend standing in for one, marked emulated), its memory promised out in fractions, and the
// emulated vGPU scheduler that shares its time among the clients (vgpu/scheduler.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "models/device_gate.h"
#include "vgpu/scheduler.h"

namespace ringbench::remote {

struct DeviceConfig {
  std::string backend = "onednn";  // what computes: models::make_network's name
  bool emulated = true;            // a CPU backend standing in for a GPU
  uint64_t memory_bytes = uint64_t{16} << 30;  // the device's memory, split among the clients
  vgpu::SchedulerOptions sharing{vgpu::Policy::best_effort, 4, std::chrono::microseconds(10000)};  // most clients at once
  int threads = 1;  // the CPU backend's threads for each client (OpenMP's count is per calling thread)
  std::chrono::milliseconds timeout{30000};       // a request's payload, a reply, a slice
  std::chrono::milliseconds idle_timeout{600000};  // a client silent this long is dropped
};

// One client's place on the device: its share of the memory and its VM in the scheduler.
struct Seat {
  int vm = -1;
  double fraction = 0;
  uint64_t cap_bytes = 0;
  std::unique_ptr<models::DeviceGate> gate;
};

class Device {
 public:
  explicit Device(DeviceConfig c);
  const DeviceConfig& config() const { return c_; }
  // A client asking for `fraction` of the memory: its seat, or Error when the fractions already
  // promised leave too little or every VM slot is taken.
  Seat take_seat(double fraction);
  void leave_seat(Seat& s);  // gives its fraction and VM back
  // What the device is, for the clients and the log ("emulated": true for the CPU standing in).
  nlohmann::json describe(const Seat* s = nullptr) const;
  std::string line() const;  // one line of it
  double promised() const;   // the fractions of its memory promised to clients now
  // Networks are built one at a time, so that their transient peaks do not add up.
  std::mutex& build_mutex() { return build_; }

 private:
  DeviceConfig c_;
  vgpu::SliceScheduler scheduler_;
  mutable std::mutex m_;  // promised_, seated_
  double promised_ = 0;
  int seated_ = 0;
  std::mutex build_;
};

}  // namespace ringbench::remote
