#include "runner/remote/pair_store.h"

#include <cstring>

#include "base/errors.h"
#include "runner/remote/wire.h"

namespace ringbench::remote {
namespace {

std::string i64(int64_t v) {
  std::string s;
  put_u64(s, static_cast<uint64_t>(v));
  return s;
}

}  // namespace

PairStore::PairStore(int fd, bool server, std::string peer, Millis timeout)
    : fd_(fd), server_(server), peer_(std::move(peer)), timeout_(timeout) {}

void PairStore::send(const BootFrame& f, net::Clock::time_point deadline) {
  const std::string b = encode(f);
  int err = 0;
  const auto r = net::send_all(fd_, b.data(), b.size(), deadline, &err);
  if (r == net::IoStatus::timeout) throw TimeoutError(-1, peer_ + " took nothing of the verbs bootstrap in time");
  if (r != net::IoStatus::ok)
    throw IoError(-1, peer_ + " vanished during the verbs bootstrap" + (err ? std::string(": ") + std::strerror(err) : ""));
}

BootFrame PairStore::read_frame(net::Clock::time_point deadline) {
  if (++frames_ > kMaxBootFrames)
    throw IoError(-1, peer_ + " sent more than " + std::to_string(kMaxBootFrames) + " bootstrap frames");
  auto recv = [&](void* p, size_t n) {
    int err = 0;
    const auto r = net::recv_all(fd_, p, n, deadline, &err);
    if (r == net::IoStatus::timeout) throw TimeoutError(-1, peer_ + " sent no verbs bootstrap frame in time");
    if (r != net::IoStatus::ok)
      throw IoError(-1, peer_ + " vanished during the verbs bootstrap" + (err ? std::string(": ") + std::strerror(err) : ""));
  };
  char h[kBootHeaderBytes];
  recv(h, sizeof h);
  std::string why;
  const auto sizes = decode_boot_header(h, &why);
  if (!sizes) throw IoError(-1, peer_ + ": " + why);
  BootFrame f{sizes->op, std::string(sizes->key, '\0'), std::string(sizes->value, '\0')};
  recv(f.key.data(), f.key.size());
  if (!f.value.empty()) recv(f.value.data(), f.value.size());
  if (!valid_boot_key(f.key)) throw IoError(-1, peer_ + ": a bootstrap key with characters outside [a-z0-9/_.-]");
  return f;
}

void PairStore::take(const BootFrame& f, net::Clock::time_point deadline) {
  if (f.op == 'S') {
    if (!kv_.emplace(f.key, f.value).second) throw IoError(-1, peer_ + " set bootstrap key '" + f.key + "' again");
  } else if (f.op == 'A' && server_) {
    send({'R', f.key, i64(count(f.key, static_cast<int64_t>(get_u64(f.value.data()))))}, deadline);
  } else {
    throw IoError(-1, peer_ + std::string(": a bootstrap '") + f.op + "' frame where none is due");
  }
}

void PairStore::set(const std::string& key, const Bytes& value) {
  if (!valid_boot_key(key) || value.size() > kMaxBootValue) throw Error("verbs bootstrap: bad key or value: " + key);
  kv_[key] = value;
  send({'S', key, value}, net::Clock::now() + timeout_);
}

Bytes PairStore::get(const std::string& key, Millis timeout) {
  const auto deadline = net::Clock::now() + timeout;
  while (!kv_.count(key)) take(read_frame(deadline), deadline);
  return kv_[key];
}

// A counter plus the peer's delta; a sum past int64's range is the peer's error, not wrapped
// (the barrier's counts are small: anything near 2^63 is a hostile or broken peer).
int64_t PairStore::count(const std::string& key, int64_t delta) {
  int64_t sum = 0;
  if (__builtin_add_overflow(counters_[key], delta, &sum))
    throw IoError(-1, peer_ + ": bootstrap counter '" + key + "' would overflow");
  return counters_[key] = sum;
}

int64_t PairStore::add(const std::string& key, int64_t delta) {
  if (server_) return count(key, delta);
  const auto deadline = net::Clock::now() + timeout_;
  send({'A', key, i64(delta)}, deadline);
  for (;;) {
    BootFrame f = read_frame(deadline);
    if (f.op == 'R' && f.key == key) return static_cast<int64_t>(get_u64(f.value.data()));
    take(f, deadline);
  }
}

}  // namespace ringbench::remote
