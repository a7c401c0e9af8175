#include "runner/remote/server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

#include "base/errors.h"
#include "collectives/auth.h"
#include "collectives/net.h"
#include "models/network.h"
#include "runner/remote/channel.h"
#include "runner/remote/session.h"
#include "runner/remote/wire.h"

namespace ringbench::remote {

namespace {
constexpr auto kHelloTimeout = std::chrono::seconds(5);  // a stranger's time to prove the secret
constexpr size_t kMaxConnections = 64;                   // at once, authenticated or not
constexpr size_t kMaxPending = 8;                        // of them, not authenticated yet
}  // namespace

DeviceServer::DeviceServer(Device& d, const std::string& host, int port, std::string secret, Log log,
                           LinkTransport transport, VerbsLinkOptions verbs)
    : d_(d), secret_(std::move(secret)), log_(std::move(log)), transport_(transport), verbs_(std::move(verbs)) {
  if (secret_.empty()) throw Error("device-server: the job's secret is missing (--secret-file or RINGBENCH_SECRET)");
  listen_fd_ = net::listen_host(host, port);
  port_ = net::bound_port(listen_fd_);
  accept_ = std::thread([this] { accept_loop(); });
}

DeviceServer::~DeviceServer() {
  stopping_ = true;
  accept_.join();
  net::close_fd(listen_fd_);
  {
    std::lock_guard lock(m_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);  // a session's next read fails at once
  }
  for (auto& w : workers_) w.thread.join();
}

size_t DeviceServer::threads_held() {
  reap();
  std::lock_guard lock(m_);
  return workers_.size();
}

void DeviceServer::reap() {
  std::list<Worker> done;
  {
    std::lock_guard lock(m_);
    for (auto it = workers_.begin(); it != workers_.end();) {
      auto next = std::next(it);
      if (it->done) done.splice(done.end(), workers_, it);
      it = next;
    }
  }
  for (auto& w : done) w.thread.join();
}

int DeviceServer::wait_served(int n, const std::atomic<bool>& stop) {
  std::unique_lock lock(m_);
  while (!stop && (n <= 0 || served_ < n)) cv_.wait_for(lock, std::chrono::milliseconds(100));
  return served_;
}

void DeviceServer::accept_loop() {
  bool out_of_resources = false;  // said once per spell, not once per retry
  while (!stopping_) {
    reap();
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      out_of_resources = false;
      admit(fd);
    } else if (net::accept_out_of_resources(errno)) {
      // The connection waits in the backlog and keeps the socket readable: pause, do not spin.
      if (!out_of_resources) log_(std::string("cannot accept a connection: ") + std::strerror(errno) + "; retrying");
      out_of_resources = true;
      std::this_thread::sleep_for(net::kAcceptBackoff);
    }
  }
}

void DeviceServer::admit(int fd) {
  std::lock_guard lock(m_);
  if (open_fds_.size() >= kMaxConnections) {
    ::close(fd);
    ++refused_;
    return;
  }
  if (pending_fds_.size() >= kMaxPending) {
    // The oldest stranger gives way: its worker's next read fails, and refuses it.
    ::shutdown(pending_fds_.front(), SHUT_RDWR);
    pending_fds_.pop_front();
  }
  net::set_nonblocking(fd);
  Worker& w = workers_.emplace_back();
  try {
    w.thread = std::thread([this, fd, &w] { serve_connection(fd, net::peer_address(fd), w); });
  } catch (const std::system_error&) {  // out of threads: refused like a full server
    workers_.pop_back();
    ::close(fd);
    ++refused_;
    return;
  }
  open_fds_.push_back(fd);
  pending_fds_.push_back(fd);
}

// The store's challenge-response (wire.h); false for a stranger.
bool DeviceServer::authenticate(int fd, const std::string& peer) {
  const auto deadline = net::Clock::now() + kHelloTimeout;
  const std::string nonce = auth::random_bytes(auth::kNonceBytes);
  const std::string challenge = std::string(kMagic, 8) + nonce;
  int err = 0;
  if (net::send_all(fd, challenge.data(), challenge.size(), deadline, &err) != net::IoStatus::ok) return false;
  std::string hello(8 + auth::kNonceBytes + auth::kMacBytes, '\0');
  if (net::recv_all(fd, hello.data(), hello.size(), deadline, &err) != net::IoStatus::ok) return false;
  const std::string client_nonce = hello.substr(8, auth::kNonceBytes);
  if (hello.compare(0, 8, kMagic, 8) != 0 ||
      !auth::same_mac(hello.substr(8 + auth::kNonceBytes), auth::mac(secret_, kClientPurpose, nonce, client_nonce))) {
    log_("refused " + peer + ": it did not prove the job's secret");
    return false;
  }
  const std::string answer = auth::mac(secret_, kServerPurpose, client_nonce, nonce);
  return net::send_all(fd, answer.data(), answer.size(), deadline, &err) == net::IoStatus::ok;
}

bool DeviceServer::agree_transport(int fd, const std::string& peer) {
  const auto deadline = net::Clock::now() + kHelloTimeout;
  char choice[kLinkChoiceBytes];
  int err = 0;
  if (net::recv_all(fd, choice, sizeof choice, deadline, &err) != net::IoStatus::ok)
    throw IoError(-1, "client " + peer + " sent no link choice after the handshake");
  std::string why;
  const auto t = decode_link_choice(choice, &why);
  if (t && *t == transport_) {
    char ok[kHeaderBytes];
    encode_reply(ok, {'O', 0});
    if (net::send_all(fd, ok, sizeof ok, deadline, &err) != net::IoStatus::ok)
      throw IoError(-1, "client " + peer + " vanished after the handshake");
    return true;
  }
  if (t)
    why = std::string("this device server serves ") + transport_name(transport_) + ", the client asked for " +
          transport_name(*t) + ": use --device remote:HOST:PORT,transport=" + transport_name(transport_);
  char h[kHeaderBytes];
  encode_reply(h, {'E', why.size()});
  const std::string answer = std::string(h, sizeof h) + why;
  (void)net::send_all(fd, answer.data(), answer.size(), deadline, &err);  // it may be gone already
  log_("refused client " + peer + ": " + why);
  return false;
}

void DeviceServer::serve_session(int fd, const std::string& peer, Channel& tcp) {
  std::unique_ptr<Channel> verbs;  // over verbs the requests leave the TCP connection
  if (transport_ == LinkTransport::verbs)
    verbs = open_verbs_channel(fd, "client " + peer, true, d_.config().timeout, verbs_);
  Session s(d_, verbs ? *verbs : tcp);
  log_(s.serve());
}

void DeviceServer::serve_connection(int fd, std::string peer, Worker& self) {
  // OpenMP's thread count and the flush-to-zero of denormals belong to the calling thread: each
  // session computes as a process of the configured threads would (bit for bit).
  models::set_compute_threads(d_.config().threads);
  bool client = false;
  {
    SocketChannel channel(fd, "client " + peer);  // closes fd
    try {
      net::set_nodelay(fd);
      const bool proved = [&] {  // no longer pending however it ends
        struct Settled {
          DeviceServer& s;
          int fd;
          ~Settled() {
            std::lock_guard lock(s.m_);
            s.pending_fds_.remove(fd);
          }
        } settled{*this, fd};
        return authenticate(fd, peer);
      }();
      if (proved) {
        if (agree_transport(fd, peer)) {
          client = true;
          serve_session(fd, peer, channel);
        }
      } else {
        ++refused_;
      }
    } catch (const std::exception& e) {
      log_("client " + peer + " ended: " + e.what() + "; its memory and its place on the device are freed");
    }
    std::lock_guard lock(m_);
    open_fds_.remove(fd);
  }
  std::lock_guard lock(m_);
  served_ += client;
  self.done = true;
  cv_.notify_all();
}

}  // namespace ringbench::remote
