// Out of file descriptors on purpose, for the tests of servers that must back off, not spin,
// when accept() fails for want of them.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/cpu_time.h"

namespace ringbench::testing {

// This process out of file descriptors for as long as it lives: the soft limit lowered (to at
// most 1024, so that filling it is quick) and every descriptor below it taken.
class DescriptorsExhausted {
 public:
  DescriptorsExhausted() {
    EXPECT_EQ(::getrlimit(RLIMIT_NOFILE, &saved_), 0);
    rlimit low = saved_;
    low.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, 1024);
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
    for (;;) {
      const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        EXPECT_EQ(errno, EMFILE) << std::strerror(errno);
        break;
      }
      fds_.push_back(fd);
    }
  }
  ~DescriptorsExhausted() {
    release();
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  DescriptorsExhausted(const DescriptorsExhausted&) = delete;
  DescriptorsExhausted& operator=(const DescriptorsExhausted&) = delete;
  void release() {
    for (int fd : fds_) ::close(fd);
    fds_.clear();
  }

 private:
  rlimit saved_{};
  std::vector<int> fds_;
};

// Connects to 127.0.0.1:port while this process is out of descriptors (the socket is made
// before), so that the server's accept() fails with EMFILE and the connection waits in its
// backlog, keeping the listening socket readable. Returns that socket (the caller closes it) and
// the CPU seconds this process used over `wait`, while the calling thread slept: a server that
// spins on its readable socket takes about all of it.
inline std::pair<int, double> cpu_while_a_connection_waits_unaccepted(int port, std::chrono::milliseconds wait) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  DescriptorsExhausted full;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << std::strerror(errno);
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(wait);
  return {fd, process_cpu_seconds() - before};
}

}  // namespace ringbench::testing
