// `ringbench device-server`'s server: listens on TCP, proves the job's secret with every
// connection (wire.h), agrees on the link's transport (channel_wire.h: a client asking for
// another than the server's is told so and closed) and serves each authenticated client its own
// Session on a thread, over the TCP connection or over verbs bootstrapped on it (verbs_link.h). A
// stranger (no hello, a wrong magic or MAC within 5 s) is closed without a byte of its being
// acted on, and counted. Connections still proving the secret have a small cap of their own, the
// oldest giving way to a new one (a client proves it within a round trip), so that strangers,
// however many and from whatever address, can neither take the places of clients nor keep a new
// client out. Out of descriptors, accepting pauses instead of spinning.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runner/remote/channel_wire.h"
#include "runner/remote/device.h"
#include "runner/remote/verbs_link.h"

namespace ringbench::remote {

class DeviceServer {
 public:
  using Log = std::function<void(const std::string&)>;
  // Listens on host:port (0: ephemeral). `secret` must not be empty. Serves its clients over
  // `transport` (verbs: on the RDMA device `verbs` names).
  DeviceServer(Device& d, const std::string& host, int port, std::string secret, Log log,
               LinkTransport transport = LinkTransport::tcp, VerbsLinkOptions verbs = {});
  ~DeviceServer();  // stops accepting, ends every session (their sockets shut down), joins
  int port() const { return port_; }
  // Blocks until `n` clients have been served and gone, or `stop` becomes true (checked every
  // 100 ms); returns the clients served so far.
  int wait_served(int n, const std::atomic<bool>& stop);
  int refused() const { return refused_.load(); }
  size_t threads_held();  // connection threads not yet joined (finished ones are)

 private:
  struct Worker {
    std::thread thread;
    bool done = false;  // it has returned: join() will not wait
  };
  void accept_loop();
  void admit(int fd);  // starts a worker for an accepted connection, or refuses it
  void reap();  // joins the finished workers
  void serve_connection(int fd, std::string peer, Worker& self);
  bool authenticate(int fd, const std::string& peer);
  // Reads the client's link choice and answers it: true when it is this server's transport.
  bool agree_transport(int fd, const std::string& peer);
  void serve_session(int fd, const std::string& peer, Channel& tcp);

  Device& d_;
  std::string secret_;
  Log log_;
  LinkTransport transport_;
  VerbsLinkOptions verbs_;
  int listen_fd_ = -1, port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> refused_{0};
  std::mutex m_;  // served_, pending_fds_, open_fds_, workers_
  std::condition_variable cv_;
  int served_ = 0;
  std::list<int> pending_fds_;  // connections that have not proved the secret yet, oldest first
  std::list<int> open_fds_;
  std::list<Worker> workers_;
  std::thread accept_;  // last: starts after everything it uses
};

}  // namespace ringbench::remote
