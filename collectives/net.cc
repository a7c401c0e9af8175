#include "collectives/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
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

// Waits for `events` on fd: 1 when ready, 0 when the deadline passed first, -1 when poll()
// failed (errno says why).
int poll_until(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, poll_ms(deadline));
    if (rc > 0) return 1;
    if (rc == 0 && Clock::now() >= deadline) return 0;
    if (rc < 0 && errno != EINTR) return -1;
  }
}

// One non-blocking connect to `ai`, bounded by `deadline`: the connected socket, or -1 with
// *err set.
int connect_addr(const addrinfo& ai, Clock::time_point deadline, int* err) {
  int fd = ::socket(ai.ai_family, ai.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai.ai_protocol);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  // An interrupted non-blocking connect goes on asynchronously, like EINPROGRESS.
  if (::connect(fd, ai.ai_addr, ai.ai_addrlen) != 0) {
    int so_error = errno;
    if (so_error == EINPROGRESS || so_error == EINTR) {
      const int ready = poll_until(fd, POLLOUT, deadline);
      so_error = ready > 0 ? 0 : ready == 0 ? ETIMEDOUT : errno;
      socklen_t len = sizeof so_error;
      if (ready > 0 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
    }
    if (so_error != 0) {
      *err = so_error;
      close_fd(fd);
      return -1;
    }
  }
  // Connecting to a free local port can, rarely, connect the socket to itself (TCP
  // simultaneous open). That is not a server.
  sockaddr_storage self{}, peer{};
  socklen_t self_len = sizeof self, peer_len = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_len) == 0 &&
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
      self_len == peer_len && std::memcmp(&self, &peer, self_len) == 0) {
    *err = ECONNREFUSED;
    close_fd(fd);
    return -1;
  }
  return fd;
}

// The IPv4 addresses of host:port (AI_PASSIVE and "" or "*": every address); 0 or a gai error.
int resolve(const std::string& host, int port, bool passive, addrinfo** res) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string service = std::to_string(port);
  const char* node = passive && (host.empty() || host == "*") ? nullptr : host.c_str();
  return ::getaddrinfo(node, service.c_str(), &hints, res);
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

// Asked through an ethtool ioctl on a socket, which answers for the calling thread's network
// namespace; sysfs shows the namespace it was mounted in, which a rank that joined a namespace
// with setns() does not see. A veth reports a fixed placeholder (10000 on recent kernels) that
// says nothing of its rate, so it counts as unknown, as loopback and most virtual NICs do.
double iface_speed_gbps(const std::string& iface) {
  if (iface.empty() || iface.size() >= IFNAMSIZ) return 0;
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, iface.data(), iface.size());
  ethtool_drvinfo drv{};
  drv.cmd = ETHTOOL_GDRVINFO;
  ifr.ifr_data = reinterpret_cast<char*>(&drv);
  const bool veth = ::ioctl(fd, SIOCETHTOOL, &ifr) == 0 && std::strncmp(drv.driver, "veth", sizeof drv.driver) == 0;
  ethtool_cmd cmd{};
  cmd.cmd = ETHTOOL_GSET;
  ifr.ifr_data = reinterpret_cast<char*>(&cmd);
  const bool got = !veth && ::ioctl(fd, SIOCETHTOOL, &ifr) == 0;
  ::close(fd);
  const uint32_t mbps = got ? ethtool_cmd_speed(&cmd) : 0;
  return mbps == 0 || mbps == static_cast<uint32_t>(SPEED_UNKNOWN) ? 0 : mbps / 1000.0;
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
      const int ready = poll_until(fd, POLLOUT, deadline);
      check_errno(ready >= 0, "poll");
      if (ready > 0) {
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

int listen_host(const std::string& host, int port) {
  if (port < 0 || port > 65535) throw Error("port " + std::to_string(port) + " is out of range 0-65535");
  addrinfo* res = nullptr;
  const int gai = resolve(host, port, true, &res);
  if (gai != 0) throw Error("cannot resolve '" + host + "': " + ::gai_strerror(gai));
  std::string last_error = "no IPv4 address";
  int listen_fd = -1;
  for (addrinfo* ai = res; ai != nullptr && listen_fd < 0; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      last_error = std::string("bind: ") + std::strerror(errno);
      close_fd(fd);
      continue;
    }
    if (::listen(fd, SOMAXCONN) != 0) {
      last_error = std::string("listen: ") + std::strerror(errno);
      close_fd(fd);
      continue;
    }
    listen_fd = fd;
  }
  ::freeaddrinfo(res);
  if (listen_fd < 0)
    throw Error("cannot listen on " + host + ":" + std::to_string(port) + ": " + last_error);
  return listen_fd;
}

int try_connect(const std::string& host, int port, Clock::time_point deadline, std::string* why) {
  addrinfo* res = nullptr;
  const int gai = resolve(host, port, false, &res);
  if (gai != 0) {
    *why = std::string("cannot resolve host: ") + ::gai_strerror(gai);
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    int err = 0;
    fd = connect_addr(*ai, deadline, &err);
    if (fd < 0) *why = std::strerror(err);
  }
  ::freeaddrinfo(res);
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  check_errno(::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0, "getsockname");
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  throw Error("listening socket is not an IP socket");
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  check_errno(flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0, "fcntl O_NONBLOCK");
}

void close_fd(int& fd) {
  if (fd >= 0) {
    ::close(fd);  // never retried on EINTR: Linux releases the descriptor regardless
    fd = -1;
  }
}

bool accept_out_of_resources(int err) {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

bool accept_connection_gone(int err) {
  return err == ECONNABORTED || err == EPROTO || err == ENETDOWN || err == ENOPROTOOPT || err == EHOSTDOWN ||
         err == ENONET || err == EHOSTUNREACH || err == EOPNOTSUPP || err == ENETUNREACH || err == EPERM;
}

int poll_ms(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
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

IoStatus send_all(int fd, const void* data, size_t len, Clock::time_point deadline, int* err) {
  auto* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t r = ::send(fd, p, len, MSG_NOSIGNAL);
    if (r >= 0) {
      p += r;
      len -= static_cast<size_t>(r);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      const int ready = poll_until(fd, POLLOUT, deadline);
      if (ready > 0) continue;
      if (ready == 0) return IoStatus::timeout;
    }
    *err = errno;
    return (errno == EPIPE || errno == ECONNRESET) ? IoStatus::closed : IoStatus::failed;
  }
  return IoStatus::ok;
}

IoStatus recv_all(int fd, void* data, size_t len, Clock::time_point deadline, int* err) {
  auto* p = static_cast<char*>(data);
  while (len > 0) {
    const ssize_t r = ::recv(fd, p, len, 0);
    if (r > 0) {
      p += r;
      len -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) {
      *err = 0;
      return IoStatus::closed;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      const int ready = poll_until(fd, POLLIN, deadline);
      if (ready > 0) continue;
      if (ready == 0) return IoStatus::timeout;
    }
    *err = errno;
    return errno == ECONNRESET ? IoStatus::closed : IoStatus::failed;
  }
  return IoStatus::ok;
}

bool write_all(int fd, const void* data, size_t len, Clock::time_point deadline) {
  int err = 0;
  const IoStatus s = send_all(fd, data, len, deadline, &err);
  if (s == IoStatus::ok || s == IoStatus::timeout) return s == IoStatus::ok;
  errno = err;
  check_errno(false, "send to " + peer_address(fd));
  return false;
}

bool read_all(int fd, void* data, size_t len, Clock::time_point deadline) {
  int err = 0;
  const IoStatus s = recv_all(fd, data, len, deadline, &err);
  if (s == IoStatus::ok || s == IoStatus::timeout) return s == IoStatus::ok;
  if (err == 0) throw Error("connection closed by " + peer_address(fd));
  errno = err;
  check_errno(false, "recv from " + peer_address(fd));
  return false;
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

std::string local_ip(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  check_errno(::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0, "getsockname");
  char text[INET6_ADDRSTRLEN] = {};
  const void* a = nullptr;
  if (ss.ss_family == AF_INET) {
    a = &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr;
  } else if (ss.ss_family == AF_INET6) {
    a = &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
  } else {
    throw Error("connection is not an IP socket");
  }
  check_errno(::inet_ntop(ss.ss_family, a, text, sizeof text) != nullptr, "inet_ntop");
  return text;
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
