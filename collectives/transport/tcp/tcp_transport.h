// TCP transport: a full mesh of `sockets_per_peer` connections between every pair of ranks.
// Messages to a peer are striped round-robin over its sockets. Sends are written at once by
// the posting thread; what does not fit in the socket buffer is finished by one epoll I/O
// thread per rank. Receives are read by the thread that waits for them (it spins briefly,
// then sleeps in poll()), so a message costs at most one wake-up. The I/O thread also sends
// heartbeats every timeout/8 and reads sockets nobody waits on, so each rank can tell a
// stopped or hung peer (silent for longer than `timeout`) from a busy one. Idle, nothing spins.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "collectives/store.h"
#include "collectives/transport.h"

namespace ringbench {

struct TcpOptions {
  std::string addr;   // IPv4 address to bind and advertise (--addr)
  std::string iface;  // or the interface whose IPv4 address to use (--iface)
  std::string default_addr = "127.0.0.1";  // when neither is given
  int sockets_per_peer = 2;
  int socket_buffer_bytes = 0;  // SO_SNDBUF/SO_RCVBUF; 0 keeps the kernel's autotuning
  std::chrono::milliseconds timeout{30000};  // connect timeout and peer-silence limit
  // How long a receiving thread polls its socket (yielding the core) before it sleeps: waking
  // a sleeping thread costs tens of microseconds in a VM, more than a small message takes.
  std::chrono::microseconds spin{200};
  std::string job_id = "ringbench";  // peers of another job are rejected at the handshake
  // The job's secret (collectives/auth.h): a connection whose peer does not prove it knows it is
  // closed unanswered and counted (path_info "unauthenticated_rejected"). Empty: a key of zero
  // bytes, for loopback jobs started by hand without one.
  std::string secret;
  std::string key_prefix = "tcp";    // store namespace, for several transports on one store
};

// Connects to all peers through `store` (collective: every rank must call it).
std::unique_ptr<Transport> make_tcp_transport(Store& store, int rank, int size,
                                              const TcpOptions& opts);

}  // namespace ringbench
