// A TCP proxy that gives each direction of every connection through it a one-way latency and a
// rate: a link model for the remote device when the kernel has no netem (this host's: the
// emulated cluster's tc htb gives its links a rate but no latency). Bytes are forwarded as they
// arrive; each chunk leaves after the link has serialised it (bytes / rate, queued behind the
// chunks before it) plus the latency, so pipelined requests overlap as on a real link.
#pragma once

#include <atomic>
#include <chrono>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace ringbench::remote {

struct LinkShape {
  std::chrono::microseconds latency{0};  // one way
  double bits_per_s = 0;                 // 0: no limit
  std::string text() const;              // "50 us one way, 10 Gbit/s"
};

// It sits in front of the server's secret check, so it takes anyone: it holds at most
// `max_connections` connections (more are closed at once), reaps a connection when both of its
// directions have ended (the server's end closing ends both), and queues at most
// queue_limit(shape) bytes each way (it stops reading a sender the link has not caught up with).
class ShapingProxy {
 public:
  static constexpr int kMaxConnections = 64;  // the device server's own cap
  // Listens on host:port (0: ephemeral) and forwards every connection to target_host:target_port.
  ShapingProxy(const std::string& host, int port, std::string target_host, int target_port, LinkShape shape,
               int max_connections = kMaxConnections);
  ~ShapingProxy();  // stops accepting, shuts every connection down, joins
  int port() const { return port_; }
  const LinkShape& shape() const { return shape_; }
  size_t connections();  // held now (finished ones reaped)
  // The bytes one direction queues before it stops reading: twice the link's bandwidth-delay
  // product, within 4..64 MiB.
  static size_t queue_limit(const LinkShape& shape);

 private:
  struct Pipe;
  void accept_loop();
  void reap();  // joins and frees the connections whose four threads have ended

  std::string target_host_;
  int target_port_;
  LinkShape shape_;
  int listen_fd_ = -1, port_ = 0;
  int max_connections_;
  std::atomic<bool> stopping_{false};
  std::mutex m_;
  std::list<std::unique_ptr<Pipe>> pipes_;
  std::thread accept_;
};

}  // namespace ringbench::remote
