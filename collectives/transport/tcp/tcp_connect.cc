// The TCP mesh: connecting to lower ranks, accepting higher ones, the authenticated handshake.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "collectives/auth.h"
#include "collectives/net.h"
#include "collectives/transport/tcp/tcp_internal.h"

namespace ringbench::tcp_detail {

void TcpTransport::connect_mesh(Store& store) {
  const std::string key = opts_.key_prefix + "/addr/";
  store.set(key + std::to_string(rank_), peers_[rank_].addr);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) peers_[r].addr = store.get(key + std::to_string(r), opts_.timeout);
    peers_[r].conns.resize(static_cast<size_t>(opts_.sockets_per_peer));
  }
  const auto deadline = Clock::now() + opts_.timeout;
  const int nsock = opts_.sockets_per_peer;

  // Higher ranks connect to lower ones; accept from higher ranks on a helper thread.
  int expected = (size_ - 1 - rank_) * nsock;
  std::exception_ptr accept_error;
  std::thread acceptor([&] {
    try {
      accept_peers(expected, deadline);
    } catch (...) {
      accept_error = std::current_exception();
    }
  });

  std::exception_ptr connect_error;
  try {
    for (int r = 0; r < rank_; ++r) {
      auto [host, port] = parse_host_port(peers_[r].addr);
      for (int i = 0; i < nsock; ++i) {
        int fd = -1;
        try {
          fd = net::connect_tcp(host, port, deadline);
        } catch (const TimeoutError& e) {
          throw TimeoutError(r, me() + ": cannot connect to " + who(r) + ": " + e.what());
        }
        auto c = std::make_unique<Conn>();
        c->fd = fd;
        c->peer = r;
        c->index = i;
        peers_[r].conns[i] = std::move(c);
        handshake(fd, r, i, deadline);
      }
    }
  } catch (...) {
    connect_error = std::current_exception();
  }
  acceptor.join();
  if (connect_error) std::rethrow_exception(connect_error);
  if (accept_error) std::rethrow_exception(accept_error);

  auto now = Clock::now();
  for (auto& p : peers_)
    for (auto& c : p.conns) {
      if (!c) continue;
      net::set_nodelay(c->fd);
      net::set_socket_buffers(c->fd, opts_.socket_buffer_bytes);
      c->last_rx = now;
      epoll_event ev{};
      ev.events = c->events = EPOLLRDHUP | EPOLLET;
      ev.data.ptr = c.get();
      check_errno(::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd, &ev) == 0, "epoll_ctl");
    }
}

// The connecting side of the handshake on `fd` to `peer`: answers the challenge, then checks
// the reply's MAC, so a rank never joins a peer that lacks the job's secret.
void TcpTransport::handshake(int fd, int peer, int socket_index, Clock::time_point deadline) {
  const int r = peer;
  Challenge ch{};
  Hello h{};
  std::memcpy(h.magic, kTcpMagic, sizeof kTcpMagic);
  h.version = kProtocolVersion;
  h.from_rank = static_cast<uint32_t>(rank_);
  h.to_rank = static_cast<uint32_t>(r);
  h.world_size = static_cast<uint32_t>(size_);
  h.socket_index = static_cast<uint32_t>(socket_index);
  h.sockets_per_peer = static_cast<uint32_t>(opts_.sockets_per_peer);
  std::strncpy(h.job_id, opts_.job_id.c_str(), sizeof h.job_id - 1);
  const std::string nonce = auth::random_bytes(auth::kNonceBytes);
  std::memcpy(h.nonce, nonce.data(), sizeof h.nonce);
  HelloReply reply{};
  bool in_time;
  try {
    in_time = net::read_all(fd, &ch, sizeof ch, deadline);
    if (in_time && std::memcmp(ch.magic, kTcpMagic, sizeof kTcpMagic) != 0)
      throw IoError(r, me() + ": " + who(r) + " is not a ringbench rank of this version (bad challenge)");
    if (in_time) {
      const std::string m = auth::mac(opts_.secret, "tcp client", std::string(ch.nonce, sizeof ch.nonce), signed_part(h));
      std::memcpy(h.mac, m.data(), sizeof h.mac);
      in_time = net::write_all(fd, &h, sizeof h, deadline) && net::read_all(fd, &reply, sizeof reply, deadline);
    }
  } catch (const IoError&) {
    throw;
  } catch (const Error& e) {
    throw IoError(r, me() + ": handshake with " + who(r) + " failed: " + e.what() +
                         " (a peer closes the connection of a rank that does not share the job's secret)");
  }
  if (!in_time) throw TimeoutError(r, me() + ": handshake with " + who(r) + " timed out");
  if (std::memcmp(reply.magic, kTcpMagic, sizeof kTcpMagic) != 0)
    throw IoError(r, me() + ": " + who(r) + " is not a ringbench rank (bad handshake reply)");
  if (!auth::same_mac(std::string(reply.mac, sizeof reply.mac),
                      auth::mac(opts_.secret, "tcp server", nonce, signed_part(reply))))
    throw IoError(r, me() + ": " + who(r) + " does not know the job's secret: not a rank of this job");
  if (reply.status != 0) {
    reply.message[sizeof reply.message - 1] = 0;
    throw IoError(r, me() + ": " + who(r) + " rejected our connection: " + reply.message);
  }
}

HelloReply TcpTransport::sign(HelloReply r, const std::string& client_nonce) const {
  const std::string m = auth::mac(opts_.secret, "tcp server", client_nonce, signed_part(r));
  std::memcpy(r.mac, m.data(), sizeof r.mac);
  return r;
}

// Accepts connections from the higher ranks until `expected` have completed a valid
// handshake. Handshakes are read concurrently, so a stray client that connects and stays
// silent costs nothing but its own grace period; at most kMaxPendingHandshakes wait at once,
// the oldest giving way to a new one (a peer of ours answers within a round trip), so a crowd
// of strays holds neither our descriptors nor a peer out. Out of descriptors, accepting pauses
// for net::kAcceptBackoff instead of spinning on the listening socket, and a timeout says why.
void TcpTransport::accept_peers(int expected, Clock::time_point deadline) {
  struct Pending {
    int fd;
    Hello hello;
    size_t got;
    Clock::time_point deadline;
    std::string nonce;  // our challenge to it
  };
  std::vector<Pending> pending;
  Clock::time_point accept_paused_until{};
  std::string accept_failure;  // the last accept() error for want of resources, for the timeout
  for (int accepted = 0; accepted < expected;) {
    auto now = Clock::now();
    if (now >= deadline) {
      for (auto& p : pending) ::close(p.fd);
      std::string missing;
      for (int r = rank_ + 1; r < size_; ++r)
        for (auto& c : peers_[r].conns)
          if (!c) {
            missing += (missing.empty() ? "" : ", ") + who(r);
            break;
          }
      throw TimeoutError(-1, me() + ": timed out after " + fmt_s(seconds(opts_.timeout)) +
                                 " waiting for " + missing + " to connect " +
                                 (accept_failure.empty() ? "(are they running, with the same job?)"
                                                         : "(this rank could not accept connections: " + accept_failure +
                                                               "; raise the limit on open files, ulimit -n)"));
    }
    const bool paused = now < accept_paused_until;
    std::vector<pollfd> fds{{paused ? -1 : listen_fd_, POLLIN, 0}};  // poll ignores a negative fd
    auto wake = paused ? std::min(deadline, accept_paused_until) : deadline;
    for (auto& p : pending) {
      fds.push_back({p.fd, POLLIN, 0});
      wake = std::min(wake, p.deadline);
    }
    auto ms = std::chrono::duration_cast<milliseconds>(wake - now).count() + 1;
    if (::poll(fds.data(), fds.size(), static_cast<int>(ms)) < 0 && errno != EINTR)
      check_errno(false, me() + ": poll while accepting peers");
    now = Clock::now();
    for (size_t i = pending.size(); i-- > 0;) {
      Pending& p = pending[i];
      bool done = false;
      if (fds[i + 1].revents) {
        ssize_t n = ::recv(p.fd, reinterpret_cast<char*>(&p.hello) + p.got, sizeof p.hello - p.got, 0);
        if (n > 0) p.got += static_cast<size_t>(n);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          reject(p.fd, "closed before completing the handshake", false);
          done = true;
        } else if (p.got == sizeof p.hello) {
          if (accept_hello(p.fd, p.hello, p.nonce, deadline)) ++accepted;
          done = true;
        }
      }
      if (!done && now >= p.deadline) {
        reject(p.fd, "no handshake within the grace period", false);
        done = true;
      }
      if (done) pending.erase(pending.begin() + static_cast<long>(i));
    }
    if (fds[0].revents & POLLIN) {
      // At most a cap's worth per wake: a flood must not keep the handshakes above from being read.
      for (size_t n = 0; n < kMaxPendingHandshakes; ++n) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
          if (errno == EINTR || net::accept_connection_gone(errno)) continue;
          if (net::accept_out_of_resources(errno)) {
            if (accept_failure.empty())
              std::cerr << "ringbench " << me() << ": cannot accept a connection: " << std::strerror(errno)
                        << "; retrying every " << net::kAcceptBackoff.count() << " ms\n";
            accept_failure = std::strerror(errno);
            accept_paused_until = Clock::now() + net::kAcceptBackoff;
          }
          break;  // EAGAIN: on the next readiness
        }
        if (pending.size() >= kMaxPendingHandshakes) {
          reject(pending.front().fd, "dropped for a newer connection (at most " +
                                         std::to_string(kMaxPendingHandshakes) + " handshakes wait at once)", false);
          pending.erase(pending.begin());
        }
        Challenge ch{};
        std::memcpy(ch.magic, kTcpMagic, sizeof kTcpMagic);
        const std::string nonce = auth::random_bytes(auth::kNonceBytes);
        std::memcpy(ch.nonce, nonce.data(), sizeof ch.nonce);
        // A new socket's buffer takes 40 bytes at once; one that does not is no peer of ours.
        if (::send(fd, &ch, sizeof ch, MSG_NOSIGNAL | MSG_DONTWAIT) != ssize_t(sizeof ch)) {
          reject(fd, "could not send the challenge", false);
          continue;
        }
        pending.push_back({fd, Hello{}, 0, std::min(deadline, now + std::chrono::seconds(5)), nonce});
      }
    }
  }
  for (auto& p : pending) reject(p.fd, "all peers already connected", false);
}

void TcpTransport::reject(int fd, const std::string& why, bool reply, const std::string& client_nonce) {
  std::cerr << "ringbench " << me() << ": rejected connection from " << net::peer_address(fd)
            << ": " << why << "\n";
  if (reply) {  // only to a peer that proved the secret: it gets the reason, signed
    HelloReply r{};
    std::memcpy(r.magic, kTcpMagic, sizeof kTcpMagic);
    r.status = 1;
    std::strncpy(r.message, why.c_str(), sizeof r.message - 1);
    r = sign(r, client_nonce);
    try {
      net::write_all(fd, &r, sizeof r, Clock::now() + milliseconds(500));
    } catch (const Error&) {
    }
  }
  ::close(fd);
}

// Validates a complete handshake; returns the new connection, or null for a rejected one.
Conn* TcpTransport::accept_hello(int fd, Hello& h, const std::string& nonce, Clock::time_point deadline) {
  const std::string client_nonce(h.nonce, sizeof h.nonce);
  auto reject = [&](const std::string& why, bool reply) -> Conn* {
    this->reject(fd, why, reply, client_nonce);
    return nullptr;
  };
  if (std::memcmp(h.magic, kTcpMagic, sizeof kTcpMagic) != 0) {
    ++unauthenticated_;
    return reject("not a ringbench peer (bad magic)", false);
  }
  // Nothing of an unauthenticated hello is acted on, or answered.
  if (!auth::same_mac(std::string(h.mac, sizeof h.mac), auth::mac(opts_.secret, "tcp client", nonce, signed_part(h)))) {
    ++unauthenticated_;
    return reject("it does not prove the job's secret (wrong MAC, or an older ringbench)", false);
  }
  h.job_id[sizeof h.job_id - 1] = 0;
  if (h.version != kProtocolVersion)
    return reject("protocol version " + std::to_string(h.version) + ", this rank speaks " +
                      std::to_string(kProtocolVersion),
                  true);
  if (opts_.job_id != h.job_id)
    return reject("job id '" + std::string(h.job_id) + "' does not match this job's '" +
                      opts_.job_id + "'",
                  true);
  if (h.world_size != static_cast<uint32_t>(size_) || h.to_rank != static_cast<uint32_t>(rank_))
    return reject("peer thinks it connects to rank " + std::to_string(h.to_rank) + " of " +
                      std::to_string(h.world_size) + ", this is rank " + std::to_string(rank_) +
                      " of " + std::to_string(size_),
                  true);
  int from = static_cast<int>(h.from_rank);
  if (from <= rank_ || from >= size_ || h.sockets_per_peer != static_cast<uint32_t>(opts_.sockets_per_peer) ||
      h.socket_index >= h.sockets_per_peer || peers_[from].conns[h.socket_index])
    return reject("unexpected or duplicate connection from rank " + std::to_string(from) +
                      " socket " + std::to_string(h.socket_index) + " of " +
                      std::to_string(h.sockets_per_peer),
                  true);
  HelloReply ok{};
  std::memcpy(ok.magic, kTcpMagic, sizeof kTcpMagic);
  ok = sign(ok, client_nonce);
  try {
    if (!net::write_all(fd, &ok, sizeof ok, deadline))
      return reject("handshake reply timed out", false);
  } catch (const Error& e) {
    return reject(e.what(), false);
  }
  auto c = std::make_unique<Conn>();
  c->fd = fd;
  c->peer = from;
  c->index = static_cast<int>(h.socket_index);
  Conn* raw = c.get();
  peers_[from].conns[h.socket_index] = std::move(c);
  return raw;
}

}  // namespace ringbench::tcp_detail
