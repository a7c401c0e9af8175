// The source side of a migration: sends the framebuffer's dirty chunks to the target.
//   Stop-and-copy: nothing moves until the stun; then every chunk.
//   Pre-copy: a thread sends rounds while the rank keeps training: round 1 every chunk, each
//   later round the chunks written since. It stops when what is left would take at most
//   `stun_target_s` at the rate the last round ran, or a round no longer shrinks (the job
//   writes as fast as the link drains), or after `max_rounds`. The stun then sends the rest.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runner/migrate/framebuffer.h"

namespace ringbench::migrate {

struct CopyPolicy {
  bool precopy = true;
  int max_rounds = 12;
  double stun_target_s = 0.25;
  double shrink = 0.9;  // a round sending more than this share of the last one does not shrink
};

struct Round {
  int round = 0;         // 1, 2, ...; the stun's round is the last
  bool stunned = false;  // sent while the rank was stunned
  uint64_t bytes = 0;
  double seconds = 0;
  uint64_t dirty_after = 0;  // bytes written while it ran (what the next round must send)
};

class Copier {
 public:
  // `connect` (run on the copier's thread, so the rank trains on meanwhile) returns a connected,
  // authenticated stream (connect_target); the copier owns and closes it.
  Copier(Framebuffer& fb, std::function<int()> connect, const CopyPolicy& policy, std::chrono::milliseconds timeout);
  ~Copier();
  Copier(const Copier&) = delete;
  Copier& operator=(const Copier&) = delete;

  // True once the rank may be stunned: at once for stop-and-copy; for pre-copy once its rule
  // is met, or its thread failed (finish() then throws that error).
  bool ready_to_stun() const { return ready_.load(); }
  // The stun: stops the pre-copy thread, sends every dirty chunk, `state` and the end, and
  // waits until the target has stored them. `progress(bytes)` is called about every second.
  void finish(const std::string& state, const std::function<void(uint64_t)>& progress);
  std::vector<Round> rounds() const;
  uint64_t bytes_sent() const { return sent_.load(); }

 private:
  void run(const std::function<int()>& connect);
  Round send_round(int number, bool stunned, const std::function<void(uint64_t)>& progress);
  bool converged(const Round& r, const Round* before) const;

  Framebuffer& fb_;
  int fd_ = -1;
  CopyPolicy policy_;
  std::chrono::milliseconds timeout_;
  std::vector<char> buf_;
  std::atomic<bool> ready_{false}, stop_{false};
  std::atomic<uint64_t> sent_{0};
  mutable std::mutex mu_;  // rounds_, error_
  std::vector<Round> rounds_;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace ringbench::migrate
