// Small POSIX socket helpers shared by the TCP transport and the runner. Every blocking step
// takes a deadline and uses poll(), so nothing here can wait forever.
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
// Link speed of `iface` in Gbit/s from sysfs; 0 when unknown (loopback, veth, virtual NICs).
double iface_speed_gbps(const std::string& iface);

// Creates a listening TCP socket on ip:port (port 0 = ephemeral); returns the fd and sets
// *bound_port.
int listen_tcp(const std::string& ip, int port, int* bound_port);
// Connects to ip:port, retrying refused connections until `deadline`; throws TimeoutError.
int connect_tcp(const std::string& ip, int port, Clock::time_point deadline);

void set_nonblocking(int fd);
void set_nodelay(int fd);
// Sets SO_SNDBUF/SO_RCVBUF (SO_*BUFFORCE first when privileged); 0 leaves kernel autotuning.
void set_socket_buffers(int fd, int bytes);

// Blocking-with-deadline I/O on a non-blocking socket. Return false on deadline;
// throw Error on a socket error or when the peer closed the connection.
bool write_all(int fd, const void* data, size_t len, Clock::time_point deadline);
bool read_all(int fd, void* data, size_t len, Clock::time_point deadline);

std::string peer_address(int fd);   // "ip:port" of the remote end
std::string local_address(int fd);  // "ip:port" of the local end

}  // namespace ringbench::net
