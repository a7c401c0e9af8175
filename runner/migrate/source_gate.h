// The target's listener (a target its source started, or a standby): anyone may connect to it,
// so it accepts every connection at once and runs each one's handshake side by side, without
// blocking on any. A connection counts only once it proves the job's secret; until then it has a
// short window (its hello and MAC) and a place among a bounded few; the oldest is dropped when a
// new one needs its place. Strangers are refused and counted, and never spend the migration's
// own deadline: the source, when it comes, is served within its round trips.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runner/migrate/wire.h"

namespace ringbench::migrate {

// Connections the listener keeps in their handshake at once, and the window each one has.
inline constexpr size_t kMaxPendingStrangers = 16;
inline constexpr Millis kMaxHelloWindow{5000};

// The connections a listener refused: none proved the job's secret.
struct SourceRefusals {
  int64_t count = 0;
  int64_t last_ns = 0;  // when the last was refused (steady clock, ns since its epoch)
  std::string last;     // what the last one did, e.g. "a connection from 10.0.0.9:4242 sent no hello ..."
  // Whether one was refused at or after `from_ns` (e.g. the stun's start): it overlapped that window.
  bool any_since(int64_t from_ns) const { return count > 0 && last_ns >= from_ns; }
  // "refused 3 unauthenticated connections (the last: ...)", or "" when none was.
  std::string summary() const;
};

class SourceGate {
 public:
  // `timeout`: the migration's; a stranger's window is the shorter of it and kMaxHelloWindow.
  // `on_refusal` is told each refusal (for the process's stderr).
  SourceGate(int listen_fd, std::string secret, const StreamShape& expected, Millis timeout,
             std::function<void(const std::string&)> on_refusal = {});
  ~SourceGate();
  SourceGate(const SourceGate&) = delete;
  SourceGate& operator=(const SourceGate&) = delete;

  // The first connection that proves the job's secret, its stream shape checked (an Error when
  // it differs: that is this job's source, sent another framebuffer). Connections still in their
  // handshake then are refused. TimeoutError at `deadline`, counting the refusals. `keep_waiting`,
  // when given, is asked about once a second; -1 when it says stop.
  int accept(std::chrono::steady_clock::time_point deadline, const std::function<bool()>& keep_waiting = {});
  const SourceRefusals& refusals() const { return refusals_; }

 private:
  struct Pending;
  void admit_new();
  bool serve(Pending& p);  // true once it proved the secret
  void refuse(size_t i, const std::string& why);
  void refuse_expired();

  int listen_fd_;
  std::string secret_;
  StreamShape expected_;
  Millis window_;
  std::function<void(const std::string&)> on_refusal_;
  std::vector<Pending> pending_;  // oldest first
  std::chrono::steady_clock::time_point accept_paused_until_{};  // out of descriptors: no accept before then
  SourceRefusals refusals_;
};

}  // namespace ringbench::migrate
