// Ping-pong through the device server's shaping proxy (runner/remote/shaper.h): does the link add
// the latency and rate it claims? An echo server on loopback, the proxy in front of it, and a
// client sending `size` bytes and waiting for them back, `rounds` times per setting. Prints, per
// one-way latency, the round trip's median, 10th and 90th percentiles, and the added time
// against no proxy (median minus the direct median), which should be 2 x the latency plus
// size / rate: the echo returns each chunk as it arrives, so the way back's serialisation runs
// beside the way out's, as on a real link with a streaming peer (plus one 64 KiB chunk's time,
// which the expected column leaves out). With a size of MiBs and no rate (--gbps 0), the added
// time is the proxy's own forwarding cost: its throughput.
//   link_pingpong [--rounds N] [--size BYTES] [--gbps G] [latency_us ...]
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collectives/net.h"
#include "runner/remote/shaper.h"

namespace {

using namespace ringbench;
using Clock = std::chrono::steady_clock;

// Echoes everything on its one connection until it closes.
struct Echo {
  int listen_fd = net::listen_host("127.0.0.1", 0);
  int port = net::bound_port(listen_fd);
  std::thread t{[this] {
    for (;;) {
      const int fd = ::accept(listen_fd, nullptr, nullptr);
      if (fd < 0) return;
      net::set_nodelay(fd);
      std::vector<char> b(1 << 16);
      for (ssize_t n; (n = ::recv(fd, b.data(), b.size(), 0)) > 0;)
        if (::send(fd, b.data(), size_t(n), MSG_NOSIGNAL) != n) break;
      ::close(fd);
    }
  }};
  ~Echo() {
    ::shutdown(listen_fd, SHUT_RDWR);
    t.join();
    ::close(listen_fd);
  }
};

std::vector<double> pingpong(int port, size_t size, int rounds) {
  std::string why;
  const int fd = net::try_connect("127.0.0.1", port, Clock::now() + std::chrono::seconds(5), &why);
  if (fd < 0) {
    std::fprintf(stderr, "connect: %s\n", why.c_str());
    std::exit(1);
  }
  net::set_nodelay(fd);
  std::vector<char> out(size, 'p'), in(size);
  std::vector<double> us;
  for (int i = 0; i < rounds + 10; ++i) {
    const auto t0 = Clock::now();
    const auto deadline = t0 + std::chrono::seconds(30);
    if (!net::write_all(fd, out.data(), size, deadline) || !net::read_all(fd, in.data(), size, deadline)) std::exit(1);
    if (i >= 10) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());  // 10 warm-up
  }
  int f = fd;
  net::close_fd(f);
  std::sort(us.begin(), us.end());
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 2000;
  size_t size = 64;
  double gbps = 0;
  std::vector<int> latencies;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (a == "--size" && i + 1 < argc) size = size_t(std::atoll(argv[++i]));
    else if (a == "--gbps" && i + 1 < argc) gbps = std::atof(argv[++i]);
    else latencies.push_back(std::atoi(argv[i]));
  }
  if (latencies.empty()) latencies = {0, 10, 50, 100, 500};
  Echo echo;
  auto pct = [](const std::vector<double>& v, double p) { return v[size_t(p * double(v.size() - 1))]; };
  const std::vector<double> direct = pingpong(echo.port, size, rounds);
  std::printf("# ping-pong of %zu bytes, %d rounds per row, through the shaping proxy at %g Gbit/s (0: no limit)\n",
              size, rounds, gbps);
  std::printf("%-22s %10s %10s %10s %12s %12s\n", "link", "median_us", "p10_us", "p90_us", "added_us", "expected_us");
  std::printf("%-22s %10.1f %10.1f %10.1f %12s %12s\n", "direct (no proxy)", pct(direct, .5), pct(direct, .1),
              pct(direct, .9), "-", "-");
  for (int lat : latencies) {
    remote::ShapingProxy proxy("127.0.0.1", 0, "127.0.0.1", echo.port,
                               {std::chrono::microseconds(lat), gbps * 1e9});
    const std::vector<double> v = pingpong(proxy.port(), size, rounds);
    const double expected = 2 * lat + (gbps > 0 ? double(size) * 8 / (gbps * 1e3) : 0);
    std::printf("%-22s %10.1f %10.1f %10.1f %12.1f %12.1f\n", ("proxy " + std::to_string(lat) + " us").c_str(),
                pct(v, .5), pct(v, .1), pct(v, .9), pct(v, .5) - pct(direct, .5), expected);
  }
  return 0;
}
