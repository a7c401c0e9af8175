// SchedulerServer and connect_gate: the slice scheduler behind a Unix stream socket, for VMs
// that are separate processes. Each connection is one VM, powered on while it is open.
//
// Wire protocol: fixed-size structs in the host's byte order (both ends are on this machine).
//   on connect, server -> client: Reply 'H' with the VM id, or Reply 'E' with a message (all
//       VMs are on) after which the server closes the connection
//   client -> server: Request 'A' with a timeout in ms: wants the device. The server's thread
//       for the connection blocks in acquire() and answers Reply 'G' with the grant's end as
//       CLOCK_MONOTONIC nanoseconds (steady_clock's epoch, so the client compares it with its
//       own clock), or Reply 'E' with the reason (timed out, shutting down)
//   client -> server: Request 'R': gives the device up; no answer
//   client -> server: Request 'M' with a timeout in ms: ready to measure. Answered with Reply
//       'M' once every VM is (MeasureBarrier), or 'E' with the reason
//   client -> server: Request 'F': finished measuring. Answered with Reply 'F' whose vm field
//       is the number of VMs still measuring
// End of file or any error on a connection powers its VM off, which releases the device.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <list>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "vgpu/measure_barrier.h"
#include "base/errors.h"
#include "vgpu/scheduler.h"
#include "vgpu/sliced_gate.h"

namespace ringbench::vgpu {

namespace {

using std::chrono::milliseconds;

struct Request {
  char op = 0;  // 'A' acquire, 'R' release, 'M' ready to measure, 'F' finished measuring
  char pad[3] = {};
  uint32_t timeout_ms = 0;
};

struct Reply {
  char kind = 0;  // 'H' hello, 'G' grant, 'M' measure, 'F' finished, 'E' error
  char pad[3] = {};
  int32_t vm = -1;  // 'F': the VMs still measuring
  int64_t grant_end_ns = 0;
  char text[240] = {};  // 'E': the message, NUL-terminated
};

static_assert(sizeof(Request) == 8 && sizeof(Reply) == 256);

// How much longer than its own timeout a client waits for the server's answer to an acquire:
// the server times the acquire out itself and says so; this only catches a hung server.
constexpr milliseconds kReplyGrace{250};
// Connecting retries this often while the socket does not exist yet or refuses.
constexpr milliseconds kConnectRetry{10};

Reply error_reply(const std::string& msg) {
  Reply r;
  r.kind = 'E';
  std::snprintf(r.text, sizeof r.text, "%s", msg.c_str());
  return r;
}

std::string errno_text(int err) { return std::generic_category().message(err); }

// Closes its fd on destruction.
struct UniqueFd {
  int fd = -1;
  explicit UniqueFd(int f = -1) : fd(f) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  void reset(int f = -1) {
    if (fd >= 0) ::close(fd);
    fd = f;
  }
};

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path) {
    throw std::invalid_argument("vGPU scheduler socket path '" + path + "' must be 1 to " +
                                std::to_string(sizeof a.sun_path - 1) + " bytes long");
  }
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

// Connects a fresh socket to `a`; returns the fd, or -1 with errno set.
int try_connect(const sockaddr_un& a) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

enum class Io { ok, closed, timed_out };

// Reads exactly `n` bytes from `fd`, waiting until `deadline` at most (time_point::max(): no
// limit) and giving up with Io::closed once `stop_fd` (if >= 0) is readable. Throws
// std::system_error on other socket errors.
Io read_exact(int fd, void* buf, size_t n, Clock::time_point deadline, int stop_fd) {
  size_t got = 0;
  while (got < n) {
    int wait_ms = -1;
    if (deadline != Clock::time_point::max()) {
      const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return Io::timed_out;
      wait_ms = static_cast<int>(std::min<int64_t>(left, INT_MAX));
    }
    pollfd p[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    const int r = ::poll(p, stop_fd >= 0 ? 2 : 1, wait_ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    if (r == 0) continue;  // the deadline is checked above
    if (stop_fd >= 0 && p[1].revents != 0) return Io::closed;
    const ssize_t k = ::recv(fd, static_cast<char*>(buf) + got, n - got, MSG_DONTWAIT);
    if (k == 0) return Io::closed;
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      if (errno == ECONNRESET || errno == EPIPE) return Io::closed;
      throw std::system_error(errno, std::generic_category(), "recv");
    }
    got += static_cast<size_t>(k);
  }
  return Io::ok;
}

// Sends a whole small message; false when the peer is gone. The messages are far smaller than
// a socket buffer and each side reads before the other sends again, so this never waits.
bool send_all(int fd, const void* buf, size_t n) {
  size_t sent = 0;
  while (sent < n) {
    const ssize_t k =
        ::send(fd, static_cast<const char*>(buf) + sent, n - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    sent += static_cast<size_t>(k);
  }
  return true;
}

}  // namespace

struct SchedulerServer::Impl {
  struct Conn {
    UniqueFd fd;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  std::string path;
  SliceScheduler sched;
  MeasureBarrier barrier;
  UniqueFd listen_fd, stop_fd;
  ino_t ino = 0;  // the socket file we created, so teardown removes no one else's
  dev_t dev = 0;
  std::thread acceptor;
  std::list<Conn> conns;  // touched by the acceptor only, then by the destructor after joining it

  Impl(const std::string& p, SchedulerOptions o, int measuring_vms)
      : path(p), sched(o), barrier(measuring_vms) {
    const sockaddr_un a = unix_address(path);
    const auto fail = [&](const std::string& what, int err) {
      throw Error("vGPU scheduler at " + path + ": " + what + ": " + errno_text(err));
    };
    // A socket file left by a server that is gone is removed; a live server keeps its own.
    struct stat st{};
    if (::lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) {
        throw Error("vGPU scheduler at " + path +
                                 ": the path exists and is not a socket");
      }
      const int probe = try_connect(a);
      if (probe >= 0) {
        ::close(probe);
        throw Error("vGPU scheduler at " + path +
                                 ": another scheduler is serving this socket");
      }
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail("removing the stale socket", errno);
    }
    // Non-blocking, so accept() after poll() cannot hang on a connection that went away.
    listen_fd.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (listen_fd.fd < 0) fail("socket", errno);
    if (::bind(listen_fd.fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      fail("bind", errno);
    }
    if (::stat(path.c_str(), &st) == 0) {
      ino = st.st_ino;
      dev = st.st_dev;
    }
    if (::listen(listen_fd.fd, 64) != 0) {
      const int err = errno;
      remove_socket();
      fail("listen", err);
    }
    stop_fd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (stop_fd.fd < 0) {
      const int err = errno;
      remove_socket();
      fail("eventfd", err);
    }
    acceptor = std::thread([this] { accept_loop(); });
  }

  ~Impl() {
    // First the scheduler, so that no waiting VM is granted the device that a closing
    // connection gives up: acquires in progress throw, and their threads answer 'E'.
    sched.shutdown();
    barrier.shutdown();
    const uint64_t one = 1;
    if (::write(stop_fd.fd, &one, sizeof one) < 0) {
      std::fprintf(stderr, "vGPU scheduler at %s: waking the server threads: %s\n", path.c_str(),
                   errno_text(errno).c_str());
    }
    acceptor.join();
    for (Conn& c : conns) ::shutdown(c.fd.fd, SHUT_RDWR);
    for (Conn& c : conns) c.thread.join();
    remove_socket();
  }

  void remove_socket() const {
    struct stat st{};
    if (::lstat(path.c_str(), &st) == 0 && st.st_ino == ino && st.st_dev == dev) {
      ::unlink(path.c_str());
    }
  }

  void accept_loop() {
    for (;;) {
      pollfd p[2] = {{listen_fd.fd, POLLIN, 0}, {stop_fd.fd, POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        std::fprintf(stderr, "vGPU scheduler at %s: poll: %s; no longer accepting\n", path.c_str(),
                     errno_text(errno).c_str());
        return;
      }
      if (p[1].revents != 0) return;
      if (p[0].revents == 0) continue;
      const int fd = ::accept4(listen_fd.fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
        // Out of descriptors or memory: the pending connection stays readable, so back off
        // (or stop) instead of spinning on it.
        std::fprintf(stderr, "vGPU scheduler at %s: accept: %s\n", path.c_str(),
                     errno_text(errno).c_str());
        if (::poll(&p[1], 1, 100) != 0) return;
        continue;
      }
      // Join the threads of closed connections so a long-lived server does not pile them up.
      conns.remove_if([](Conn& c) {
        if (!c.done.load()) return false;
        c.thread.join();
        return true;
      });
      Conn& c = conns.emplace_back();
      c.fd.reset(fd);
      try {
        c.thread = std::thread([this, &c] { serve(c); });
      } catch (const std::system_error& e) {
        std::fprintf(stderr, "vGPU scheduler at %s: no thread for a new VM: %s\n", path.c_str(),
                     e.what());
        conns.pop_back();  // closes the connection: the client sees the server gone
      }
    }
  }

  // One VM: powered on while its connection is open.
  void serve(Conn& c) {
    const int fd = c.fd.fd;
    int vm = -1;
    try {
      vm = sched.power_on();
    } catch (const std::exception& e) {
      const Reply r = error_reply(e.what());
      send_all(fd, &r, sizeof r);
      ::shutdown(fd, SHUT_RDWR);  // the client sees the end at once; the fd closes when reaped
      c.done = true;
      return;
    }
    try {
      Reply hello;
      hello.kind = 'H';
      hello.vm = vm;
      bool open = send_all(fd, &hello, sizeof hello);
      while (open) {
        Request rq;
        if (read_exact(fd, &rq, sizeof rq, Clock::time_point::max(), stop_fd.fd) != Io::ok) break;
        if (rq.op == 'A') {
          Reply r;
          try {
            const auto end = sched.acquire(vm, milliseconds(rq.timeout_ms));
            r.kind = 'G';
            r.vm = vm;
            r.grant_end_ns =
                std::chrono::duration_cast<std::chrono::nanoseconds>(end.time_since_epoch())
                    .count();
          } catch (const std::exception& e) {
            r = error_reply(e.what());
          }
          open = send_all(fd, &r, sizeof r);
        } else if (rq.op == 'R') {
          sched.release(vm);
        } else if (rq.op == 'M' || rq.op == 'F') {
          const Reply r = measure_reply(vm, rq);
          open = send_all(fd, &r, sizeof r);
        } else {
          std::fprintf(stderr, "vGPU scheduler at %s: VM %d sent unknown request %d; closing it\n",
                       path.c_str(), vm, rq.op);
          open = false;
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vGPU scheduler at %s: VM %d: %s; powering it off\n", path.c_str(), vm,
                   e.what());
    }
    sched.power_off(vm);
    barrier.leave(vm);
    ::shutdown(fd, SHUT_RDWR);
    c.done = true;
  }

  Reply measure_reply(int vm, const Request& rq) {
    Reply r;
    r.kind = rq.op;
    try {
      if (rq.op == 'M') barrier.arrive(vm, milliseconds(rq.timeout_ms));
      else r.vm = barrier.finish(vm);
    } catch (const std::exception& e) {
      r = error_reply(e.what());
    }
    return r;
  }
};

SchedulerServer::SchedulerServer(const std::string& socket_path, SchedulerOptions o, int measuring_vms)
    : impl_(std::make_unique<Impl>(socket_path, o, measuring_vms)) {}

SchedulerServer::~SchedulerServer() = default;

const std::string& SchedulerServer::path() const { return impl_->path; }

SliceScheduler& SchedulerServer::scheduler() { return impl_->sched; }

namespace {

// The client side: a slice is an 'A' answered by a grant, giving it up an 'R'.
class RemoteGate final : public SlicedGate {
 public:
  RemoteGate(const std::string& path, milliseconds timeout)
      : path_(path), timeout_(std::clamp(timeout, milliseconds(0), milliseconds(UINT32_MAX))) {
    const sockaddr_un a = unix_address(path);
    const auto deadline = Clock::now() + timeout_;
    for (;;) {
      const int fd = try_connect(a);
      if (fd >= 0) {
        fd_.reset(fd);
        break;
      }
      const int err = errno;
      // The server may not have created its socket yet, or be about to accept.
      const bool not_yet = err == ENOENT || err == ECONNREFUSED || err == EAGAIN;
      if (!not_yet) fail("connect: " + errno_text(err));
      if (Clock::now() >= deadline) {
        fail("no server within " + std::to_string(timeout_.count()) +
             " ms (connect: " + errno_text(err) + ")");
      }
      std::this_thread::sleep_for(
          std::min<Clock::duration>(kConnectRetry, deadline - Clock::now()));
    }
    Reply hello;
    switch (read_exact(fd_.fd, &hello, sizeof hello, deadline + kReplyGrace, -1)) {
      case Io::ok: break;
      case Io::closed: fail("server closed the connection before assigning a VM");
      case Io::timed_out: fail("no VM assigned within " + std::to_string(timeout_.count()) + " ms");
    }
    if (hello.kind == 'E') fail(text_of(hello));
    if (hello.kind != 'H')
      fail("unexpected answer '" + std::string(1, hello.kind) + "' to connecting");
    vm_ = hello.vm;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    fd_.reset();
    inside_ = false;
    throw Error("vGPU scheduler at " + path_ + ": " + what);
  }
  static std::string text_of(Reply& r) {
    r.text[sizeof r.text - 1] = 0;
    return r.text;
  }

  Clock::time_point request() override {
    const Reply r = ask('A', "a slice");
    return Clock::time_point(
        std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(r.grant_end_ns)));
  }

  void begin_measuring() override { ask('M', "the other VMs to start measuring"); }
  bool others_measuring() override { return ask('F', "the other VMs' progress").vm > 0; }

  // Sends request `op` and returns the server's answer of the same kind; `what` names what
  // this VM waits for, in errors.
  Reply ask(char op, const std::string& what) {
    if (fd_.fd < 0) fail("connection closed after an earlier error");
    Request rq;
    rq.op = op;
    rq.timeout_ms = static_cast<uint32_t>(timeout_.count());
    const auto t0 = Clock::now();
    if (!send_all(fd_.fd, &rq, sizeof rq)) fail("server gone (asking for " + what + ")");
    Reply r;
    try {
      switch (read_exact(fd_.fd, &r, sizeof r, t0 + timeout_ + kReplyGrace, -1)) {
        case Io::ok: break;
        case Io::closed:
          fail("server gone while VM " + std::to_string(vm_) + " waited for " + what);
        case Io::timed_out:
          fail("timed out waiting for " + what + " after " + std::to_string(timeout_.count()) +
               " ms (no answer from the server)");
      }
    } catch (const std::system_error& e) {
      fail(e.what());
    }
    if (r.kind == 'E') fail(text_of(r));
    const char want = op == 'A' ? 'G' : op;
    if (r.kind != want)
      fail("unexpected answer '" + std::string(1, r.kind) + "' to a request for " + what);
    return r;
  }

  void give_back() override {
    Request rq;
    rq.op = 'R';
    if (!send_all(fd_.fd, &rq, sizeof rq)) fail("server gone (giving the device up)");
  }

  const std::string path_;
  const milliseconds timeout_;
  UniqueFd fd_;
  int vm_ = -1;
};

}  // namespace

std::unique_ptr<models::DeviceGate> connect_gate(const std::string& socket_path,
                                                 std::chrono::milliseconds timeout) {
  return std::make_unique<RemoteGate>(socket_path, timeout);
}

}  // namespace ringbench::vgpu
