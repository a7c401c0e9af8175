#include "runner/remote/shaper.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <system_error>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "collectives/net.h"

namespace ringbench::remote {

namespace {

using Clock = std::chrono::steady_clock;

// Sleeps until `t` with the kernel's timer slack at 1 ns (50 us by default, the size of the
// latencies emulated here).
void sleep_until(Clock::time_point t) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  timespec ts{time_t(ns / 1000000000), long(ns % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

}  // namespace

std::string LinkShape::text() const {
  char b[96];
  if (bits_per_s > 0)
    std::snprintf(b, sizeof b, "%lld us one way, %.3g Gbit/s", (long long)latency.count(), bits_per_s / 1e9);
  else
    std::snprintf(b, sizeof b, "%lld us one way, no rate limit", (long long)latency.count());
  return b;
}

// One direction of one connection: a reader stamps each chunk with when it leaves the link; a
// writer sends it then. The reader stops reading while `limit` bytes are queued, and ends when
// the writer has failed.
struct Direction {
  int from = -1, to = -1;
  LinkShape shape;
  size_t limit = 0;
  bool ends_both = false;  // when this direction ends, the whole connection does
  std::atomic<int>* finished = nullptr;  // counts this connection's ended threads
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::pair<Clock::time_point, std::vector<char>>> q;
  size_t queued = 0;
  bool ended = false, write_failed = false;
  Clock::time_point link_free;  // when the link has serialised everything queued so far

  void read_loop(const std::atomic<bool>& stop) {
    std::vector<char> buf(64 << 10);
    while (!stop) {
      {
        std::unique_lock lock(m);
        if (write_failed) break;
        if (queued >= limit) {  // backpressure: the sender waits in its socket buffer
          cv.wait_for(lock, std::chrono::milliseconds(100));
          continue;
        }
      }
      pollfd p{from, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::recv(from, buf.data(), buf.size(), 0);
      if (n <= 0 && (n == 0 || (errno != EAGAIN && errno != EINTR))) break;
      if (n <= 0) continue;
      const auto now = Clock::now();
      const auto wire = shape.bits_per_s > 0
                            ? std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(double(n) * 8 / shape.bits_per_s))
                            : Clock::duration::zero();
      std::lock_guard lock(m);
      link_free = std::max(link_free, now) + wire;
      q.emplace_back(link_free + shape.latency, std::vector<char>(buf.begin(), buf.begin() + n));
      queued += size_t(n);
      cv.notify_all();
    }
    {
      std::lock_guard lock(m);
      ended = true;
      cv.notify_all();
    }
    ++*finished;
  }

  void write_loop(const std::atomic<bool>& stop) {
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    for (;;) {
      std::unique_lock lock(m);
      cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return !q.empty() || ended || stop; });
      if (q.empty()) {
        if (ended || stop) break;
        continue;
      }
      auto [at, bytes] = std::move(q.front());
      q.pop_front();
      lock.unlock();
      sleep_until(at);
      int err = 0;  // send_all, not write_all: a reset peer is an end here, not an exception that kills the process
      const bool sent =
          net::send_all(to, bytes.data(), bytes.size(), Clock::now() + std::chrono::seconds(60), &err) == net::IoStatus::ok;
      lock.lock();
      queued -= bytes.size();
      cv.notify_all();
      if (!sent) {  // nothing more can cross: the reader stops, the queue goes
        write_failed = true;
        q.clear();
        queued = 0;
        break;
      }
    }
    ::shutdown(to, SHUT_WR);  // the end of this direction crosses the link too
    if (ends_both) {
      ::shutdown(from, SHUT_RDWR);
      ::shutdown(to, SHUT_RDWR);
    }
    ++*finished;
  }
};

struct ShapingProxy::Pipe {
  int a = -1, b = -1;
  Direction up, down;
  std::atomic<int> finished{0};
  std::thread threads[4];
  ~Pipe() {
    ::shutdown(a, SHUT_RDWR);
    ::shutdown(b, SHUT_RDWR);
    for (auto& t : threads)
      if (t.joinable()) t.join();
    net::close_fd(a);
    net::close_fd(b);
  }
};

size_t ShapingProxy::queue_limit(const LinkShape& shape) {
  const double bdp = shape.bits_per_s / 8 * std::chrono::duration<double>(shape.latency).count();
  return size_t(std::clamp(2 * bdp, double(4 << 20), double(64 << 20)));
}

ShapingProxy::ShapingProxy(const std::string& host, int port, std::string target_host, int target_port, LinkShape shape,
                           int max_connections)
    : target_host_(std::move(target_host)), target_port_(target_port), shape_(shape), max_connections_(max_connections) {
  if (shape.latency.count() < 0 || shape.bits_per_s < 0) throw Error("a link's latency and rate must be >= 0");
  if (max_connections < 1) throw Error("a link needs room for at least one connection");
  listen_fd_ = net::listen_host(host, port);
  port_ = net::bound_port(listen_fd_);
  accept_ = std::thread([this] { accept_loop(); });
}

ShapingProxy::~ShapingProxy() {
  stopping_ = true;
  accept_.join();
  net::close_fd(listen_fd_);
  std::lock_guard lock(m_);
  pipes_.clear();
}

size_t ShapingProxy::connections() {
  reap();
  std::lock_guard lock(m_);
  return pipes_.size();
}

void ShapingProxy::reap() {
  std::list<std::unique_ptr<Pipe>> done;
  {
    std::lock_guard lock(m_);
    for (auto it = pipes_.begin(); it != pipes_.end();) {
      auto next = std::next(it);
      if ((*it)->finished == 4) done.splice(done.end(), pipes_, it);
      it = next;
    }
  }
  done.clear();  // joins threads that have ended, closes their fds
}

void ShapingProxy::accept_loop() {
  while (!stopping_) {
    reap();
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (client < 0) {
      // The connection waits in the backlog and keeps the socket readable: pause, do not spin.
      if (net::accept_out_of_resources(errno)) std::this_thread::sleep_for(net::kAcceptBackoff);
      continue;
    }
    if (connections() >= size_t(max_connections_)) {  // full: this one is closed unserved
      net::close_fd(client);
      continue;
    }
    std::string why;
    const int server = net::try_connect(target_host_, target_port_, Clock::now() + std::chrono::seconds(5), &why);
    if (server < 0) {
      ::close(client);
      continue;
    }
    net::set_nodelay(client);
    net::set_nodelay(server);
    auto pipe = std::make_unique<Pipe>();
    Pipe& pp = *pipe;
    pp.a = client;
    pp.b = server;
    pp.up.from = pp.down.to = client;
    pp.up.to = pp.down.from = server;
    pp.up.shape = pp.down.shape = shape_;
    pp.up.limit = pp.down.limit = queue_limit(shape_);
    pp.up.finished = pp.down.finished = &pp.finished;
    pp.down.ends_both = true;  // the server closing ends the connection, even if its client never does
    try {
      pp.threads[0] = std::thread([&pp, this] { pp.up.read_loop(stopping_); });
      pp.threads[1] = std::thread([&pp, this] { pp.up.write_loop(stopping_); });
      pp.threads[2] = std::thread([&pp, this] { pp.down.read_loop(stopping_); });
      pp.threads[3] = std::thread([&pp, this] { pp.down.write_loop(stopping_); });
    } catch (const std::system_error&) {  // out of threads: ~Pipe shuts down and joins those started
      continue;
    }
    std::lock_guard lock(m_);
    pipes_.push_back(std::move(pipe));
  }
}

}  // namespace ringbench::remote
