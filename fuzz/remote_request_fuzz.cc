// libFuzzer: the device server's request decoder and its operations (runner/remote/session.cc)
// fed an arbitrary byte stream as an authenticated client's requests (the handshake is the
// store's, fuzzed by store_protocol_fuzz). Memory: a device of 64 MiB, so a request can only
// make what a small cap allows; every request must be answered or refused, never crash or hang.
#include <cstdint>
#include <cstring>
#include <string>

#include "base/device_memory.h"
#include "base/errors.h"
#include "fuzz/memory_channel.h"
#include "runner/remote/channel.h"
#include "runner/remote/device.h"
#include "runner/remote/session.h"

namespace {

using namespace ringbench;

using fuzzing::MemoryChannel;  // the input as what the other side sends

remote::Device& device() {
  static remote::Device d([] {
    remote::DeviceConfig c;
    c.backend = "reference";
    c.memory_bytes = 64 << 20;  // LeNet trains in it at small batches; MobileNet and Inception do not fit
    c.timeout = std::chrono::milliseconds(1000);
    DeviceMemory::instance().set_cap(c.memory_bytes);  // as device-server does: the device's own cap
    return c;
  }());
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  MemoryChannel c(data, size);
  const size_t in_use = DeviceMemory::instance().in_use();
  try {
    remote::Session s(device(), c);
    s.serve();
  } catch (const Error&) {  // refused, as the server would: it then closes the connection
  }
  if (device().promised() != 0) __builtin_trap();  // a session's end gives its seat back
  if (DeviceMemory::instance().in_use() != in_use) __builtin_trap();  // and every byte it held
  return 0;
}
