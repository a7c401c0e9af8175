// Our ring over TCP: a full mesh of sockets, striped (collectives/transport/tcp/tcp_transport.h).
#include "collectives/transport/tcp/tcp_transport.h"
#include "runner/backends/ring.h"
#include "runner/job/world.h"

namespace ringbench {
namespace {

std::unique_ptr<Transport> connect_tcp(const BackendSetup& s) {
  TcpOptions o;
  o.addr = s.net.addr;
  o.iface = s.net.iface;
  o.default_addr = s.world.default_addr;
  o.sockets_per_peer = s.net.sockets_per_peer;
  o.socket_buffer_bytes = s.net.socket_buffer_bytes;
  o.timeout = s.timeout;
  o.spin = s.net.spin;
  o.job_id = s.world.job_id;
  o.secret = s.world.secret;
  o.key_prefix = s.key_prefix + "/tcp";  // a new rendezvous per command and ring epoch
  return make_tcp_transport(s.store, s.rank, s.size, o);
}

RINGBENCH_REGISTER_BACKEND(tcp, ring_backend({.name = "tcp", .order = 10, .help = "our ring over TCP",
                                              .connect = connect_tcp}));

}  // namespace
}  // namespace ringbench
