// Small POSIX socket helpers shared by the TCP transport, the store and the runner. Every
// blocking step takes a deadline and uses poll(), so nothing here can wait forever.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace ringbench::net {

using Clock = std::chrono::steady_clock;

// IPv4 address of interface `iface` ("eth0"); throws Error listing the interfaces otherwise.
std::string iface_ipv4(const std::string& iface);
// Name of the interface that holds IPv4 address `ip`, or "" when none does.
std::string iface_of_ipv4(const std::string& ip);
// Whether every IPv4 address `host` resolves to is a loopback address (127.0.0.0/8); false
// when it does not resolve.
bool is_loopback_host(const std::string& host);
// Nominal link speed of `iface` in Gbit/s, as ethtool reports it in the calling thread's network
// namespace; 0 when unknown (loopback, veth, virtual NICs that report none).
double iface_speed_gbps(const std::string& iface);

// Creates a listening TCP socket on ip:port (port 0 = ephemeral); returns the fd and sets
// *bound_port.
int listen_tcp(const std::string& ip, int port, int* bound_port);
// Connects to ip:port, retrying refused connections until `deadline`; throws TimeoutError.
int connect_tcp(const std::string& ip, int port, Clock::time_point deadline);

// Listens on host:port, host being a name or an address resolved with getaddrinfo ("" or "*":
// every address; port 0: ephemeral), on the first IPv4 address that binds. Returns a blocking
// socket; throws Error "port N is out of range 0-65535", "cannot resolve 'host': ..." or
// "cannot listen on host:port: ...".
int listen_host(const std::string& host, int port);
// One attempt to connect to host:port (resolved with getaddrinfo, IPv4), address after address,
// bounded by `deadline`. Returns the connected non-blocking socket, or -1 with *why set to the
// resolver's error ("cannot resolve host: ...") or the last connect's strerror. A socket
// connected to itself (TCP simultaneous open on a free local port) counts as refused.
int try_connect(const std::string& host, int port, Clock::time_point deadline, std::string* why);
// The port a bound socket (IPv4 or IPv6) has; throws Error.
int bound_port(int fd);

void set_nonblocking(int fd);
// Closes fd if open and sets it to -1.
void close_fd(int& fd);
// accept()'s failures for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM). The
// connection it could not take keeps the listening socket readable, so a loop that polls that
// socket must stop polling it for kAcceptBackoff instead of spinning on it.
bool accept_out_of_resources(int err);
inline constexpr std::chrono::milliseconds kAcceptBackoff{100};
// accept()'s failures that are the new connection's own, already gone (accept(2), "Error
// handling"): the next connection is accepted instead.
bool accept_connection_gone(int err);

// Milliseconds until `deadline`, rounded up (0 once passed), for poll().
int poll_ms(Clock::time_point deadline);
void set_nodelay(int fd);
// Sets SO_SNDBUF/SO_RCVBUF (SO_*BUFFORCE first when privileged); 0 leaves kernel autotuning.
void set_socket_buffers(int fd, int bytes);

// Blocking-with-deadline I/O on a non-blocking socket. Return false on deadline;
// throw Error on a socket error or when the peer closed the connection.
bool write_all(int fd, const void* data, size_t len, Clock::time_point deadline);
bool read_all(int fd, void* data, size_t len, Clock::time_point deadline);

// The same, reporting instead of throwing: `closed` when the peer closed or reset the
// connection, `failed` on another error; *err is then its errno (0 for an orderly close).
enum class IoStatus { ok, timeout, closed, failed };
IoStatus send_all(int fd, const void* data, size_t len, Clock::time_point deadline, int* err);
IoStatus recv_all(int fd, void* data, size_t len, Clock::time_point deadline, int* err);

std::string peer_address(int fd);   // "ip:port" of the remote end
std::string local_address(int fd);  // "ip:port" of the local end
// The local IP address (IPv4 or IPv6) of a connected socket, without the port; throws Error.
std::string local_ip(int fd);

}  // namespace ringbench::net
