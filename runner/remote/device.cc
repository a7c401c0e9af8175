#include "runner/remote/device.h"

#include <cstdio>

#include "base/errors.h"

namespace ringbench::remote {

namespace {
std::string mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", double(bytes) / double(1 << 20));
  return b;
}
}  // namespace

Device::Device(DeviceConfig c) : c_(std::move(c)), scheduler_(c_.sharing) {
  // A session keeps every buffer in host memory and binds it to the network: a GPU backend's
  // bind() takes device pointers, so it would compute on host addresses.
  if (!c_.emulated || c_.backend == "cudnn")
    throw Error("device-server: backend " + c_.backend + " computes on the GPU, and the server keeps its clients' "
                "buffers in host memory only (device memory is not implemented): serve a CPU backend (onednn or "
                "reference), which stands in for a GPU");
}

Seat Device::take_seat(double fraction) {
  if (!(fraction > 0 && fraction <= 1)) throw Error("a fraction of the device must be in (0, 1]");
  Seat s;
  {
    std::lock_guard lock(m_);
    if (promised_ + fraction > 1 + 1e-9) {
      char b[160];
      std::snprintf(b, sizeof b, "%.3g of the device's memory was asked for, but %.3g of it is promised to %d "
                    "client(s) already", fraction, promised_, seated_);
      throw Error(b);
    }
    try {
      s.vm = scheduler_.power_on();
    } catch (const std::exception& e) {
      throw Error("every client slot of the device is taken (" + std::to_string(seated_) + "): " + e.what());
    }
    promised_ += fraction;
    ++seated_;
  }
  s.fraction = fraction;
  s.cap_bytes = uint64_t(double(c_.memory_bytes) * fraction);
  s.gate = vgpu::make_local_gate(scheduler_, s.vm, c_.timeout);
  return s;
}

void Device::leave_seat(Seat& s) {
  if (s.vm < 0) return;
  s.gate.reset();
  scheduler_.power_off(s.vm);
  std::lock_guard lock(m_);
  promised_ -= s.fraction;
  --seated_;
  s.vm = -1;
}

nlohmann::json Device::describe(const Seat* s) const {
  nlohmann::json d = {{"backend", c_.backend},
                      {"emulated", c_.emulated},
                      {"device", c_.emulated ? "the CPU (" + c_.backend + ") standing in for a GPU" : "CUDA GPU"},
                      {"memory_bytes", c_.memory_bytes},
                      {"threads", c_.threads},
                      {"policy", vgpu::policy_name(c_.sharing.policy)},
                      {"max_clients", c_.sharing.max_instances},
                      {"slice_us", c_.sharing.slice.count()}};
  if (s) d.update({{"vm", s->vm}, {"fraction", s->fraction}, {"cap_bytes", s->cap_bytes}});
  return d;
}

double Device::promised() const {
  std::lock_guard lock(m_);
  return promised_;
}

std::string Device::line() const {
  return (c_.emulated ? "EMULATED GPU: the CPU (" + c_.backend + ", " + std::to_string(c_.threads) + " threads) standing in"
                      : "CUDA GPU (" + c_.backend + ")") +
         ", memory " + mib(c_.memory_bytes) + (c_.emulated ? " (an emulated cap)" : "") + ", time shared " +
         vgpu::policy_name(c_.sharing.policy) + " among at most " + std::to_string(c_.sharing.max_instances) +
         " clients, slice " + std::to_string(c_.sharing.slice.count() / 1000) + " ms";
}

}  // namespace ringbench::remote
