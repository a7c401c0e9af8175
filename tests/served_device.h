// A device server on loopback for the remote-GPU tests: one Device, its DeviceServer on an
// ephemeral port, and the server's log lines collected for assertions.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "models/network.h"
#include "runner/remote/client.h"
#include "runner/remote/server.h"

namespace ringbench::testing {

struct ServedDevice {
  ServedDevice(uint64_t memory_bytes, std::chrono::milliseconds timeout, const std::string& secret,
               remote::LinkTransport transport = remote::LinkTransport::tcp,
               std::string backend = models::available_backends().front())
      : device([&] {
          remote::DeviceConfig c;
          c.backend = std::move(backend);
          c.memory_bytes = memory_bytes;
          c.timeout = timeout;
          return c;
        }()),
        server(
            device, "127.0.0.1", 0, secret,
            [this](const std::string& s) {
              std::lock_guard lock(m);
              log += s + "\n";
            },
            transport) {}
  remote::DeviceSpec spec(double fraction = 1.0,
                          remote::LinkTransport t = remote::LinkTransport::tcp) const {
    return {"127.0.0.1", server.port(), fraction, t};
  }
  std::string logged() {
    std::lock_guard lock(m);
    return log;
  }
  remote::Device device;
  std::mutex m;
  std::string log;
  remote::DeviceServer server;
};

}  // namespace ringbench::testing
