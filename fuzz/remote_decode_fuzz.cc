// libFuzzer: the device server's decoders and its operations on buffers, fast (thousands of
// inputs a second): the input goes to the request decoders as a payload (a network spec, a
// forward call), and, as in remote_request_fuzz, as an authenticated client's request stream to a
// Session, except that a stream which opens a network is left to remote_request_fuzz (building
// and running a model there takes seconds per input under the sanitizers). Every request must be
// answered or refused, never crash or hang, and a session's end gives back its seat and memory.
#include <cstdint>
#include <cstring>
#include <string>

#include "base/device_memory.h"
#include "base/errors.h"
#include "fuzz/memory_channel.h"
#include "runner/remote/device.h"
#include "runner/remote/session.h"
#include "runner/remote/wire.h"

namespace {

using namespace ringbench;
using namespace ringbench::remote;

Device& device() {
  static Device d([] {
    DeviceConfig c;
    c.backend = "reference";
    c.memory_bytes = 64 << 20;
    c.timeout = std::chrono::milliseconds(1000);
    DeviceMemory::instance().set_cap(c.memory_bytes);  // as device-server does: the device's own cap
    return c;
  }());
  return d;
}

// Whether the stream, read as the session reads it (a header, then its payload), opens a network.
bool opens_a_network(const uint8_t* data, size_t size) {
  for (size_t at = 0; size - at >= kHeaderBytes;) {
    if (static_cast<Op>(data[at]) == Op::open_network) return true;
    const uint64_t length = get_u64(reinterpret_cast<const char*>(data) + at + 8);
    if (length > size - at - kHeaderBytes) return false;
    at += kHeaderBytes + length;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string payload(reinterpret_cast<const char*>(data), size);
  std::string why;
  if (const auto s = decode_network_spec(payload, &why))
    if (s->batch < 1 || s->batch > 65536 || s->image_size < 0 || s->image_size > 1024) __builtin_trap();
  (void)decode_forward_call(payload, &why);
  if (opens_a_network(data, size)) return 0;
  fuzzing::MemoryChannel c(data, size);
  const size_t in_use = DeviceMemory::instance().in_use();
  try {
    Session s(device(), c);
    s.serve();
  } catch (const Error&) {  // refused, as the server would: it then closes the connection
  }
  if (device().promised() != 0) __builtin_trap();
  if (DeviceMemory::instance().in_use() != in_use) __builtin_trap();
  return 0;
}
