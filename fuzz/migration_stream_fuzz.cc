// libFuzzer: what a migration target reads after the handshake (runner/migrate/wire.cc,
// rank_state.cc): the records of the stream, then the rank's state record. Any bytes give a
// restored state, or an Error, never a write outside the framebuffer.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "base/errors.h"
#include "collectives/net.h"
#include "runner/migrate/framebuffer.h"
#include "runner/migrate/rank_state.h"
#include "runner/migrate/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringbench;
  if (size > (1 << 16)) return 0;  // within one socket buffer: written whole, then closed
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
  const int buffer = 1 << 18;
  ::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
  if (size > 0 && ::write(fds[0], data, size) != ssize_t(size)) {
    ::close(fds[0]);
    ::close(fds[1]);
    return 0;
  }
  ::close(fds[0]);
  net::set_nonblocking(fds[1]);
  migrate::Framebuffer fb(2 * migrate::Framebuffer::kChunkBytes + 17, 0);
  try {
    uint64_t received = 0;
    const std::string state = migrate::receive_stream(fds[1], fb, std::chrono::milliseconds(50), &received);
    migrate::decode_loop_state(state, 100, 2);
  } catch (const Error&) {
  }
  ::close(fds[1]);
  return 0;
}
