// Out of file descriptors on purpose, for the tests of servers that must back off, not spin,
// when accept() fails for want of them.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

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

inline double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace ringbench::testing
