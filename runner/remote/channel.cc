#include "runner/remote/channel.h"

#include <cerrno>
#include <cstring>

#include "base/errors.h"
#include "collectives/net.h"

namespace ringbench::remote {

SocketChannel::SocketChannel(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}

SocketChannel::~SocketChannel() { net::close_fd(fd_); }

bool SocketChannel::read(void* p, size_t n, Millis timeout, bool at_boundary) {
  const auto deadline = net::Clock::now() + timeout;
  if (at_boundary && n > 0) {  // one byte first: an orderly end here is the client leaving
    int err = 0;
    const auto r = net::recv_all(fd_, p, 1, deadline, &err);
    if (r == net::IoStatus::closed && err == 0) return false;
    if (r == net::IoStatus::timeout)
      throw TimeoutError(-1, peer_ + " sent nothing for " + std::to_string(timeout.count() / 1000) + " s");
    if (r != net::IoStatus::ok) throw IoError(-1, peer_ + " vanished: " + std::strerror(err ? err : ECONNRESET));
    p = static_cast<char*>(p) + 1;
    --n;
  }
  int err = 0;
  const auto r = net::recv_all(fd_, p, n, deadline, &err);
  if (r == net::IoStatus::timeout)
    throw TimeoutError(-1, peer_ + " did not send the rest of a message within " + std::to_string(timeout.count()) + " ms");
  if (r != net::IoStatus::ok)
    throw IoError(-1, peer_ + " vanished in the middle of a message" + (err ? std::string(": ") + std::strerror(err) : ""));
  return true;
}

void SocketChannel::write(const void* p, size_t n, Millis timeout) {
  int err = 0;
  const auto r = net::send_all(fd_, p, n, net::Clock::now() + timeout, &err);
  if (r == net::IoStatus::timeout)
    throw TimeoutError(-1, peer_ + " took nothing of a message for " + std::to_string(timeout.count()) + " ms");
  if (r != net::IoStatus::ok)
    throw IoError(-1, peer_ + " vanished" + (err ? std::string(": ") + std::strerror(err) : ""));
}

}  // namespace ringbench::remote
