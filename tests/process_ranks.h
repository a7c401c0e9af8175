// Runs ranks as forked child processes (as in a real run, minus the network): each child
// connects through a TcpStore to the parent's TcpStoreServer and reports over a pipe, one line
// at a time, and by its exit status. The parent collects the lines with the time it read them.
//
// fork() safety: the parent creates the store's listening socket, forks every child while it
// is still single-threaded, and only then starts the TcpStoreServer (which owns a thread).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "collectives/net.h"
#include "collectives/store.h"
#include "collectives/transport/tcp/tcp_transport.h"

namespace ringbench::testing {

// The job secret of the tests' stores (collectives/auth.h); any 32 bytes do.
inline const std::string kTestSecret = "ringbench tests' job secret, 32b";

// In a child: sends one line to the parent.
using Report = std::function<void(const std::string&)>;

// Writes one line to the report pipe with write(2) only (no stdio buffers in a forked child).
inline void write_line(int fd, std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  s.push_back('\n');
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
}

// The most specific of ringbench's error classes `e` belongs to, for "fail <kind>: " lines.
inline std::string kind_of(const std::exception& e) {
  if (dynamic_cast<const TimeoutError*>(&e)) return "TimeoutError";
  if (dynamic_cast<const IoError*>(&e)) return "IoError";
  if (dynamic_cast<const Error*>(&e)) return "Error";
  return "exception";
}

// Runs `n` ranks as child processes; the destructor SIGKILLs and reaps any still running, so
// no child outlives a failed assertion.
class ProcessRanks {
 public:
  using Clock = std::chrono::steady_clock;
  // Runs in the child; its return value is the child's exit status.
  using Body = std::function<int(int rank, int store_port, const Report& report)>;
  struct Line {
    std::string text;
    Clock::time_point at;  // when the parent read it
  };
  struct Proc {
    pid_t pid = -1;
    int fd = -1;  // read end of the child's report pipe
    std::string partial;
    std::vector<Line> lines;
    bool exited = false;
    int status = 0;
    Clock::time_point exit_at{};

    const Line* find(std::string_view prefix) const {
      for (auto& l : lines)
        if (l.text.compare(0, prefix.size(), prefix) == 0) return &l;
      return nullptr;
    }
    bool exited_ok() const { return exited && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
  };

  ProcessRanks() = default;
  ProcessRanks(const ProcessRanks&) = delete;
  ProcessRanks& operator=(const ProcessRanks&) = delete;

  ~ProcessRanks() {
    for (auto& p : procs_)
      if (!p.exited) ::kill(p.pid, SIGKILL);
    for (auto& p : procs_) {
      if (!p.exited) {
        int st = 0;
        while (::waitpid(p.pid, &st, 0) < 0 && errno == EINTR) {
        }
      }
      if (p.fd >= 0) ::close(p.fd);
    }
    server_.reset();
  }

  void start(int n, const Body& body) {
    int port = 0;
    int listen_fd = net::listen_tcp("127.0.0.1", 0, &port);
    procs_.reserve(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) {
        ::close(listen_fd);
        check_errno(false, "pipe2");
      }
      const pid_t parent = ::getpid();
      const pid_t pid = ::fork();
      if (pid == 0) {
        // Never outlive the test process, even when it is killed.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(3);
        ::close(listen_fd);
        ::close(fds[0]);
        for (auto& p : procs_) ::close(p.fd);
        int rc = 2;
        try {
          rc = body(r, port, [fd = fds[1]](const std::string& s) { write_line(fd, s); });
        } catch (const std::exception& e) {
          write_line(fds[1], "fail " + kind_of(e) + ": " + e.what());
        } catch (...) {
          write_line(fds[1], "fail unknown exception");
        }
        ::_exit(rc);
      }
      ::close(fds[1]);
      if (pid < 0) {
        int err = errno;
        ::close(fds[0]);
        ::close(listen_fd);
        errno = err;
        check_errno(false, "fork");
      }
      Proc p;
      p.pid = pid;
      p.fd = fds[0];
      procs_.push_back(std::move(p));
    }
    server_ = std::make_unique<TcpStoreServer>(listen_fd, kTestSecret);  // owns listen_fd from here
  }

  // Collects the children's reports and exits until `done()` holds (true) or `deadline`
  // passes (false).
  bool pump_until(Clock::time_point deadline, const std::function<bool()>& done) {
    for (;;) {
      reap();
      if (done()) return true;
      const auto now = Clock::now();
      if (now >= deadline) return false;
      std::vector<pollfd> fds;
      std::vector<size_t> idx;
      for (size_t i = 0; i < procs_.size(); ++i)
        if (procs_[i].fd >= 0) {
          fds.push_back({procs_[i].fd, POLLIN, 0});
          idx.push_back(i);
        }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
      const int ms = static_cast<int>(std::clamp<long long>(left, 0, 10));
      if (::poll(fds.data(), fds.size(), ms) > 0)
        for (size_t k = 0; k < fds.size(); ++k)
          if (fds[k].revents) read_from(procs_[idx[k]]);
    }
  }
  bool pump_for(Clock::duration d) {
    return pump_until(Clock::now() + d, [] { return false; });
  }
  bool all_exited() const {
    return std::all_of(procs_.begin(), procs_.end(), [](const Proc& p) { return p.exited; });
  }

  void signal(int rank, int sig) {
    check_errno(::kill(proc(rank).pid, sig) == 0, "kill");
  }

  // Sends `sig` to `victim`, then collects until every other rank has exited (true) or
  // `deadline` passes (false); the victim is killed and reaped either way.
  bool others_exit_after_signal(int victim, int sig, Clock::time_point deadline) {
    signal(victim, sig);
    const bool exited = pump_until(deadline, [&] {
      for (int r = 0; r < size(); ++r)
        if (r != victim && !proc(r).exited) return false;
      return true;
    });
    if (sig != SIGKILL) signal(victim, SIGKILL);
    pump_until(Clock::now() + std::chrono::seconds(5), [&] { return proc(victim).exited; });
    return exited;
  }
  const Proc& proc(int rank) const { return procs_.at(static_cast<size_t>(rank)); }
  int size() const { return static_cast<int>(procs_.size()); }
  int store_port() const { return server_ ? server_->port() : -1; }

  // Everything the children said, for assertion messages.
  std::string describe() const {
    std::string s;
    for (size_t r = 0; r < procs_.size(); ++r) {
      const Proc& p = procs_[r];
      s += "\n  rank " + std::to_string(r) + " (pid " + std::to_string(p.pid) + "): ";
      if (!p.exited)
        s += "still running";
      else if (WIFEXITED(p.status))
        s += "exit " + std::to_string(WEXITSTATUS(p.status));
      else if (WIFSIGNALED(p.status))
        s += "killed by signal " + std::to_string(WTERMSIG(p.status));
      for (auto& l : p.lines) s += "\n    | " + l.text;
    }
    return s;
  }

 private:
  // One read, or (after the child exited, when every write end is closed) all that is left.
  void read_from(Proc& p, bool drain = false) {
    char buf[4096];
    do {
      ssize_t k = ::read(p.fd, buf, sizeof buf);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {
        ::close(p.fd);
        p.fd = -1;
        return;
      }
      p.partial.append(buf, static_cast<size_t>(k));
      const auto now = Clock::now();
      for (size_t nl; (nl = p.partial.find('\n')) != std::string::npos;) {
        p.lines.push_back({p.partial.substr(0, nl), now});
        p.partial.erase(0, nl + 1);
      }
    } while (drain);
  }

  void reap() {
    for (auto& p : procs_) {
      if (p.exited) continue;
      int st = 0;
      if (::waitpid(p.pid, &st, WNOHANG) == p.pid) {
        if (p.fd >= 0) read_from(p, true);
        p.exited = true;
        p.status = st;
        p.exit_at = Clock::now();
      }
    }
  }

  std::vector<Proc> procs_;
  std::unique_ptr<TcpStoreServer> server_;
};

// In a child: connects rank `rank` of `n`, then runs `work` and reports "ready" (transport
// set up), then "ok" or "fail <kind>: <what>", then "closed" once the transport is torn down.
// The failure is reported while the transport still exists, so its time is the time of the
// failure, not of the teardown after it. `make` builds the transport over the rank's store.
using MakeTransport = std::function<std::unique_ptr<Transport>(Store&)>;
inline int run_rank(int store_port, const Report& report, const MakeTransport& make,
                    const std::function<void(Transport&)>& work) {
  std::unique_ptr<TcpStore> store;
  std::unique_ptr<Transport> t;
  int rc = 0;
  try {
    store = std::make_unique<TcpStore>("127.0.0.1", store_port, std::chrono::seconds(30), kTestSecret);
    t = make(*store);
    report("ready");
    work(*t);
    report("ok");
  } catch (const std::exception& e) {
    report("fail " + kind_of(e) + ": " + e.what());
    rc = 1;
  }
  t.reset();
  report("closed");
  return rc;
}

// The same over the TCP transport.
inline int run_rank(int rank, int n, int store_port, const Report& report,
                    const TcpOptions& opts, const std::function<void(Transport&)>& work) {
  return run_rank(store_port, report, [&](Store& s) { return make_tcp_transport(s, rank, n, opts); }, work);
}

}  // namespace ringbench::testing
