#include "collectives/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include "base/errors.h"

namespace ringbench::net {
namespace {

sockaddr_in make_addr(const std::string& ip, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (ip.empty() || ip == "0.0.0.0") {
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1) {
    throw Error("'" + ip + "' is not an IPv4 address");
  }
  return sa;
}

std::string to_string(const sockaddr_in& sa) {
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(ntohs(sa.sin_port));
}

int ms_until(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(std::min<long long>(ms + 1, 1 << 30));
}

// Waits for `events` on fd; false when the deadline passed first.
bool poll_until(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, ms_until(deadline));
    if (rc > 0) return true;
    if (rc == 0) {
      if (Clock::now() >= deadline) return false;
      continue;
    }
    if (errno != EINTR) check_errno(false, "poll");
  }
}

}  // namespace

std::string iface_ipv4(const std::string& iface) {
  ifaddrs* list = nullptr;
  check_errno(getifaddrs(&list) == 0, "getifaddrs");
  std::string found, names;
  for (ifaddrs* it = list; it; it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
    auto* sa = reinterpret_cast<sockaddr_in*>(it->ifa_addr);
    char buf[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &sa->sin_addr, buf, sizeof buf);
    if (iface == it->ifa_name && found.empty()) found = buf;
    names += std::string(names.empty() ? "" : ", ") + it->ifa_name + " (" + buf + ")";
  }
  freeifaddrs(list);
  if (found.empty())
    throw Error("interface '" + iface + "' has no IPv4 address; interfaces with IPv4: " + names);
  return found;
}

std::string iface_of_ipv4(const std::string& ip) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* it = list; it && name.empty(); it = it->ifa_next) {
    if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, buf, sizeof buf);
    if (ip == buf) name = it->ifa_name;
  }
  freeifaddrs(list);
  return name;
}

double iface_speed_gbps(const std::string& iface) {
  if (iface.empty()) return 0;
  std::ifstream f("/sys/class/net/" + iface + "/speed");
  long mbps = 0;
  if (!(f >> mbps) || mbps <= 0) return 0;  // virtual links report -1 or fail to read
  return static_cast<double>(mbps) / 1000.0;
}

int listen_tcp(const std::string& ip, int port, int* bound_port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  check_errno(fd >= 0, "socket");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa = make_addr(ip, port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 256) != 0) {
    int err = errno;
    ::close(fd);
    errno = err;
    check_errno(false, "cannot listen on " + ip + ":" + std::to_string(port));
  }
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  if (bound_port) *bound_port = ntohs(sa.sin_port);
  set_nonblocking(fd);
  return fd;
}

int connect_tcp(const std::string& ip, int port, Clock::time_point deadline) {
  sockaddr_in sa = make_addr(ip, port);
  std::string last = "no attempt";
  auto backoff = std::chrono::milliseconds(5);
  while (Clock::now() < deadline) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    check_errno(fd >= 0, "socket");
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    if (rc != 0 && errno == EINPROGRESS) {
      if (poll_until(fd, POLLOUT, deadline)) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) return fd;
    last = std::strerror(errno);
    ::close(fd);
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  throw TimeoutError(-1, "could not connect to " + ip + ":" + std::to_string(port) +
                             " before the timeout (last error: " + last + ")");
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  check_errno(flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0, "fcntl O_NONBLOCK");
}

void set_nodelay(int fd) {
  int one = 1;
  check_errno(::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0, "TCP_NODELAY");
}

void set_socket_buffers(int fd, int bytes) {
  if (bytes <= 0) return;
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

bool write_all(int fd, const void* data, size_t len, Clock::time_point deadline) {
  auto* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!poll_until(fd, POLLOUT, deadline)) return false;
    } else {
      check_errno(false, "send to " + peer_address(fd));
    }
  }
  return true;
}

bool read_all(int fd, void* data, size_t len, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = ::recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n == 0) {
      throw Error("connection closed by " + peer_address(fd));
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!poll_until(fd, POLLIN, deadline)) return false;
    } else {
      check_errno(false, "recv from " + peer_address(fd));
    }
  }
  return true;
}

std::string peer_address(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "?";
  return to_string(sa);
}

std::string local_address(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "?";
  return to_string(sa);
}

bool is_loopback_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return false;
  bool all = res != nullptr;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    const uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(ai->ai_addr)->sin_addr.s_addr);
    if ((a >> 24) != 127) all = false;
  }
  ::freeaddrinfo(res);
  return all;
}

}  // namespace ringbench::net
