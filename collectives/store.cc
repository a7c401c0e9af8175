// InProcStore, store_barrier and parse_host_port, and the helpers of store_internal.h. The TCP
// store lives in store_server.cc and store_client.cc (its wire protocol: store_wire.h).
#include "collectives/store.h"

#include <charconv>
#include <cstdio>
#include <system_error>

#include "base/errors.h"
#include "collectives/store_internal.h"

namespace ringbench {

namespace store_detail {

std::string seconds_text(Millis ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

Millis clamp_timeout(Millis timeout) {
  constexpr Millis kMax = std::chrono::hours(24 * 365);
  if (timeout < Millis::zero()) return Millis::zero();
  return timeout > kMax ? kMax : timeout;
}

bool parse_int64(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(first, last, out);
  return ec == std::errc() && ptr == last;
}

std::string key_timeout_text(const std::string& key, Millis timeout, const std::string& store) {
  return "timed out after " + seconds_text(timeout) + " s waiting for key '" + key +
         "' in store " + store;
}

}  // namespace store_detail

void InProcStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    kv_[key] = value;
  }
  cv_.notify_all();
}

Bytes InProcStore::get(const std::string& key, Millis timeout) {
  const auto deadline = std::chrono::steady_clock::now() + store_detail::clamp_timeout(timeout);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto it = kv_.find(key);
    if (it != kv_.end()) return it->second;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      it = kv_.find(key);
      if (it != kv_.end()) return it->second;
      throw KeyTimeoutError(-1, store_detail::key_timeout_text(key, timeout, describe()));
    }
  }
}

int64_t InProcStore::add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = kv_.find(key);
    if (it != kv_.end() && !store_detail::parse_int64(it->second, value)) {
      throw Error("store " + describe() + ": value of key '" + key + "' is not an integer");
    }
    if (__builtin_add_overflow(value, delta, &value)) {
      throw Error("store " + describe() + ": counter '" + key + "' overflows");
    }
    kv_[key] = std::to_string(value);
  }
  cv_.notify_all();
  return value;
}

void store_barrier(Store& store, const std::string& name, int size, Millis timeout) {
  if (size <= 0) {
    throw Error("store_barrier '" + name + "': size must be positive, got " + std::to_string(size));
  }
  const std::string arrived_key = name + "/arrived";
  const std::string done_key = name + "/done";
  const int64_t arrived = store.add(arrived_key, 1);
  if (arrived > size) {
    throw Error("store_barrier '" + name + "': " + std::to_string(arrived) +
                " ranks arrived but the barrier has size " + std::to_string(size) +
                " (barrier name reused?)");
  }
  if (arrived == size) store.set(done_key, "1");
  try {
    store.get(done_key, timeout);
  } catch (const TimeoutError&) {
    std::string count = "fewer than " + std::to_string(size);
    try {
      count = std::to_string(store.add(arrived_key, 0));
    } catch (const Error&) {
      // Keep the generic count; the timeout is the error worth reporting.
    }
    throw TimeoutError(-1, "barrier '" + name + "' in store " + store.describe() +
                               " timed out after " + store_detail::seconds_text(timeout) +
                               " s: only " + count + " of " + std::to_string(size) +
                               " ranks arrived");
  }
}

std::pair<std::string, int> parse_host_port(const std::string& s) {
  const auto bad = [&s](const std::string& why) {
    return Error("invalid address '" + s + "': " + why + " (expected host:port)");
  };
  std::string host;
  std::string port_text;
  if (!s.empty() && s.front() == '[') {
    const size_t close = s.find(']');
    if (close == std::string::npos) throw bad("missing ']'");
    host = s.substr(1, close - 1);
    if (close + 1 >= s.size() || s[close + 1] != ':') throw bad("missing ':' after ']'");
    port_text = s.substr(close + 2);
  } else {
    const size_t colon = s.rfind(':');
    if (colon == std::string::npos) throw bad("missing ':'");
    host = s.substr(0, colon);
    if (host.find(':') != std::string::npos) {
      throw bad("IPv6 addresses must be written in brackets, as [::1]:port");
    }
    port_text = s.substr(colon + 1);
  }
  if (host.empty()) throw bad("empty host");
  if (port_text.empty()) throw bad("empty port");
  for (char c : port_text) {
    if (c < '0' || c > '9') throw bad("port '" + port_text + "' is not a number");
  }
  if (port_text.size() > 5) throw bad("port '" + port_text + "' is out of range 0-65535");
  const int port = std::stoi(port_text);
  if (port > 65535) throw bad("port '" + port_text + "' is out of range 0-65535");
  return {host, port};
}

}  // namespace ringbench
