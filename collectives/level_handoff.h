// Hands chunks between the two levels of a pipelined allreduce running on two threads (the
// hierarchical allreduce: the level within the node and the level across the nodes). Each level
// counts the chunks it has finished; the other waits, bounded, for a count. The first failure of
// either thread is kept and stops the other's waits; run_guarded() never lets an exception out
// of a thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <string>

namespace ringbench {

class LevelHandoff {
 public:
  enum Stage { scattered, crossed };  // chunks reduce-scattered within the node, allreduced across

  // `on_timeout` aborts the levels' transports (so that every peer stops), given why.
  LevelHandoff(std::chrono::milliseconds limit, std::function<void(const std::string&)> on_timeout)
      : limit_(limit), on_timeout_(std::move(on_timeout)) {}

  // Marks one more chunk done at `stage`.
  void advance(Stage stage);
  // Waits until `chunks` are done at `stage`. Throws the private Stopped when the other thread
  // failed, TimeoutError (after aborting the transports) after the limit; `what` names the wait.
  void wait_for(Stage stage, size_t chunks, const std::string& what);
  // Runs `body`, keeping its exception if it is the first; never throws.
  void run_guarded(const std::function<void()>& body) noexcept;
  // Rethrows the first failure, if any.
  void rethrow_first();

 private:
  struct Stopped {};
  std::mutex mu_;
  std::condition_variable cv_;
  size_t done_[2] = {0, 0};
  std::exception_ptr first_;
  std::chrono::milliseconds limit_;
  std::function<void(const std::string&)> on_timeout_;
};

}  // namespace ringbench
