// A connection's bytes for the device protocol: a TCP socket with deadlines, a message transport
// (transport_channel.h: verbs), or memory (the fuzz target and tests). Errors are IoErrors naming
// the peer.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace ringbench::remote {

using Millis = std::chrono::milliseconds;

class Channel {
 public:
  virtual ~Channel() = default;
  // Reads n bytes within `timeout`. `at_boundary`: the peer may end the connection here (before
  // a request): then false. Throws IoError on a timeout or an end anywhere else.
  virtual bool read(void* p, size_t n, Millis timeout, bool at_boundary = false) = 0;
  virtual void write(const void* p, size_t n, Millis timeout) = 0;
  // Sends what write() may have gathered: called after each request and reply (a socket sends
  // at once, so there nothing is gathered).
  virtual void flush(Millis /*timeout*/) {}
  virtual std::string peer() const = 0;
};

// Over a connected non-blocking socket; owns it (closes it).
class SocketChannel final : public Channel {
 public:
  SocketChannel(int fd, std::string peer);
  ~SocketChannel() override;
  bool read(void* p, size_t n, Millis timeout, bool at_boundary = false) override;
  void write(const void* p, size_t n, Millis timeout) override;
  std::string peer() const override { return peer_; }
  int fd() const { return fd_; }

 private:
  int fd_;
  std::string peer_;
};

}  // namespace ringbench::remote
