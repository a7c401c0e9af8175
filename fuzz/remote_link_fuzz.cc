// libFuzzer: the device link's decoders (runner/remote/channel_wire.h) and the verbs bootstrap's
// store reading an arbitrary peer (runner/remote/pair_store.h): the link choice, a stream
// descriptor, and the input as every byte the peer sends on the bootstrap connection, read by
// the server (which answers adds) and by the client (which awaits one). Anything must be taken or
// refused with an Error, never crash, and the frames read stay within kMaxBootFrames.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "base/errors.h"
#include "collectives/net.h"
#include "runner/remote/channel_wire.h"
#include "runner/remote/pair_store.h"

namespace {

using namespace ringbench;
using namespace ringbench::remote;

// The input as what the peer sends on a connection, then its end.
void read_as(bool server, const uint8_t* data, size_t size) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
  if (size > 0 && ::send(sv[1], data, size, MSG_NOSIGNAL) != ssize_t(size)) size = 0;  // too big: nothing
  ::shutdown(sv[1], SHUT_WR);
  net::set_nonblocking(sv[0]);
  PairStore s(sv[0], server, "fuzz peer", Millis(20));
  try {
    if (server)
      s.get("verbs/conn/1", Millis(20));
    else
      s.add("verbs/ready/arrived", 1);
  } catch (const Error&) {
  }
  ::close(sv[0]);
  ::close(sv[1]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string why;
  if (size >= kLinkChoiceBytes) {
    char b[kLinkChoiceBytes];
    std::memcpy(b, data, sizeof b);
    (void)decode_link_choice(b, &why);
  }
  if (size >= kStreamHeaderBytes) {
    const auto* p = reinterpret_cast<const char*>(data);
    uint64_t seq = 0;
    std::memcpy(&seq, p + 24, 8);
    if (const auto h = decode_stream_header(p, seq, &why))
      if (h->inline_bytes > kInlineBytes || h->bulk > kMaxBulk) __builtin_trap();
  }
  read_as(true, data, size);
  read_as(false, data, size);
  return 0;
}
