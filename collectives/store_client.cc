// TcpStore: the TCP store's client. The wire protocol is described in store_wire.h.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include "base/errors.h"
#include "collectives/auth.h"
#include "collectives/net.h"
#include "collectives/store.h"
#include "collectives/store_internal.h"
#include "collectives/store_wire.h"

namespace ringbench {

namespace {

using namespace store_wire;  // the protocol's constants, encoding, Clock
using net::IoStatus;
using store_detail::clamp_timeout;
using store_detail::key_timeout_text;
using store_detail::seconds_text;

// How long a client waits on a SET/ADD (or on the transfer of a reply) before giving up on
// the server: set()/add() take no timeout, yet no wait may be unbounded.
constexpr Millis kIoTimeout = std::chrono::seconds(60);
// Extra time a client gives the server to answer a GET after the GET's own timeout.
constexpr Millis kGetGrace = std::chrono::seconds(2);

}  // namespace

TcpStore::TcpStore(const std::string& host, int port, Millis timeout, const std::string& secret)
    : host_(host), port_(port) {
  const std::string where = host + ":" + std::to_string(port);
  if (port <= 0 || port > 65535) {
    throw Error("store " + where + ": port is out of range 1-65535");
  }
  const auto deadline = Clock::now() + clamp_timeout(timeout);
  std::string last_error = "timed out";
  auto backoff = Millis(10);
  for (;;) {
    fd_ = net::try_connect(host, port, deadline, &last_error);
    if (fd_ >= 0) {
      const int one = 1;
      ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // best effort
      // The hello fits in any socket buffer; give it a moment even when the deadline is near.
      const auto hello_deadline = std::max(deadline, Clock::now() + Millis(1000));
      const std::string why = authenticate(secret, hello_deadline);
      if (why.empty()) return;
      last_error = why;
      net::close_fd(fd_);
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    const auto left = std::chrono::ceil<Millis>(deadline - now);
    std::this_thread::sleep_for(std::min(backoff, left));
    backoff = std::min(backoff * 2, Millis(500));
  }
  throw TimeoutError(-1, "could not connect to store " + where + " within " +
                             seconds_text(timeout) + " s: " + last_error);
}

// Answers the server's challenge and checks its answer to ours; returns "" when both prove they
// know `secret`, else why not (a connection problem, worth retrying). A server that does not
// know the secret, or rejects ours, is an Error at once: retrying cannot help.
std::string TcpStore::authenticate(const std::string& secret, TimePoint deadline) {
  const std::string where = host_ + ":" + std::to_string(port_);
  const auto io_error = [](IoStatus r, int err, const char* doing) {
    return std::string(r == IoStatus::timeout ? "timed out " : "connection closed ") + doing +
           (err != 0 ? std::string(": ") + std::strerror(err) : std::string());
  };
  int err = 0;
  char challenge[kChallenge];
  IoStatus r = net::recv_all(fd_, challenge, sizeof challenge, deadline, &err);
  if (r != IoStatus::ok) return io_error(r, err, "waiting for the store's challenge");
  if (std::memcmp(challenge, kStoreMagic, sizeof kStoreMagic) != 0)
    throw IoError(-1, "store " + where + " is not a ringbench store of this version (bad challenge)");
  const std::string server_nonce(challenge + sizeof kStoreMagic, auth::kNonceBytes);
  const std::string nonce = auth::random_bytes(auth::kNonceBytes);
  std::string hello(kStoreMagic, sizeof kStoreMagic);
  hello += nonce;
  hello += auth::mac(secret, "store client", server_nonce, nonce);
  r = net::send_all(fd_, hello.data(), hello.size(), deadline, &err);
  if (r != IoStatus::ok) return io_error(r, err, "sending the answer to the store's challenge");
  std::string answer(auth::kMacBytes, '\0');
  r = net::recv_all(fd_, answer.data(), answer.size(), deadline, &err);
  if (r == IoStatus::closed)
    throw IoError(-1, "store " + where + " rejected this rank: it does not share the job's secret "
                      "(RINGBENCH_SECRET or --secret-file must be the same on every rank)");
  if (r != IoStatus::ok) return io_error(r, err, "waiting for the store's answer");
  if (!auth::same_mac(answer, auth::mac(secret, "store server", nonce, server_nonce)))
    throw IoError(-1, "store " + where + " does not know the job's secret: not this job's store");
  return "";
}

TcpStore::~TcpStore() { net::close_fd(fd_); }

std::string TcpStore::describe() const { return "tcp://" + host_ + ":" + std::to_string(port_); }

std::string TcpStore::local_address() const {
  try {
    return net::local_ip(fd_);
  } catch (const Error& e) {
    throw Error("store " + describe() + ": " + e.what());
  }
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  request('S', key, value, kIoTimeout);
}

Bytes TcpStore::get(const std::string& key, Millis timeout) {
  const Millis t = clamp_timeout(timeout);
  return request('G', key, encode_u64(static_cast<uint64_t>(t.count())), t);
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  const Bytes r = request('A', key, encode_u64(static_cast<uint64_t>(delta)), kIoTimeout);
  if (r.size() != 8) {
    throw IoError(-1, "store " + describe() + ": malformed reply to add (" +
                          std::to_string(r.size()) + " bytes)");
  }
  return static_cast<int64_t>(get_u64(r.data()));
}

// Sends one request and reads its reply. `timeout` is the GET's wait (the server answers by
// then), or the I/O limit for SET/ADD. After any transport failure the connection is shut down:
// the byte stream may be out of step, so later requests fail fast instead of reading a stale
// reply. (fd_ itself stays valid so that local_address() needs no lock.)
Bytes TcpStore::request(char op, const std::string& key, const Bytes& value, Millis timeout) {
  const std::string where = host_ + ":" + std::to_string(port_);
  if (key.size() > kMaxKey) {
    throw Error("store " + describe() + ": key of " + std::to_string(key.size()) +
                " bytes exceeds the limit of " + std::to_string(kMaxKey) + " bytes");
  }
  if (value.size() > kMaxValue) {
    throw Error("store " + describe() + ": value of " + std::to_string(value.size()) +
                " bytes for key '" + key + "' exceeds the limit of " + std::to_string(kMaxValue) +
                " bytes");
  }
  std::string head;
  head.reserve(kRequestHeader + key.size() + 8);
  head.push_back(op);
  put_u32(head, static_cast<uint32_t>(key.size()));
  head += key;
  put_u64(head, value.size());

  std::lock_guard<std::mutex> lock(mu_);
  const auto fail = [&](IoStatus r, int err, const std::string& doing) {
    ::shutdown(fd_, SHUT_RDWR);
    if (r == IoStatus::closed) throw IoError(-1, "store " + where + " closed the connection");
    if (r == IoStatus::timeout) {
      if (op == 'G' && doing == "waiting for the reply") {
        throw TimeoutError(-1, key_timeout_text(key, timeout, describe()) +
                                   " (the store did not answer)");
      }
      throw TimeoutError(-1, "store " + where + " did not respond within " +
                                 seconds_text(kIoTimeout) + " s while " + doing);
    }
    throw IoError(-1, "store " + where + ": " + doing + ": " + std::strerror(err));
  };

  int err = 0;
  auto deadline = Clock::now() + kIoTimeout;
  IoStatus r = net::send_all(fd_, head.data(), head.size(), deadline, &err);
  if (r == IoStatus::ok) r = net::send_all(fd_, value.data(), value.size(), deadline, &err);
  if (r != IoStatus::ok) fail(r, err, "sending a request");

  char status_head[kResponseHeader];
  deadline = Clock::now() + (op == 'G' ? timeout + kGetGrace : kIoTimeout);
  r = net::recv_all(fd_, status_head, sizeof status_head, deadline, &err);
  if (r != IoStatus::ok) fail(r, err, "waiting for the reply");
  const char status = status_head[0];
  const uint64_t length = get_u64(status_head + 1);
  if ((status != kOk && status != kTimedOut && status != kFailed) || length > kMaxValue + 65536) {
    ::shutdown(fd_, SHUT_RDWR);
    throw IoError(-1, "store " + where + " sent a malformed reply (is it a ringbench store?)");
  }
  Bytes payload(static_cast<size_t>(length), '\0');
  deadline = Clock::now() + kIoTimeout;
  r = net::recv_all(fd_, payload.data(), payload.size(), deadline, &err);
  if (r != IoStatus::ok) fail(r, err, "reading the reply");

  if (status == kTimedOut) throw KeyTimeoutError(-1, key_timeout_text(key, timeout, describe()));
  if (status == kFailed) throw Error("store " + describe() + ": " + payload);
  return payload;
}

}  // namespace ringbench
