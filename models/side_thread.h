// A second thread for a backward pass: it runs posted tasks (node indices) in the order they
// were posted, while the caller goes on with its own work; at the end the caller takes over
// the tasks not started yet and waits for the one running. Used by the oneDNN backend to
// compute weight gradients beside the data gradients (Network::set_weight_grad_thread).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ringbench::models {

class SideThread {
 public:
  // run(task, lane): lane 1 on the side thread, 0 on the caller (in finish()). `init` runs
  // first on the side thread (its OpenMP thread count, its floating-point mode).
  SideThread(std::function<void(int task, int lane)> run, const std::function<void()>& init);
  ~SideThread();
  SideThread(const SideThread&) = delete;
  SideThread& operator=(const SideThread&) = delete;

  void begin(size_t tasks);  // a new pass of tasks 0..tasks-1, none posted
  void post(int task);
  bool done(int task);
  // Runs the posted tasks not started yet here, waits for the rest, then rethrows the first
  // exception a task threw.
  void finish();

 private:
  void loop();
  void run_one(std::unique_lock<std::mutex>& lock, int lane);

  std::function<void(int, int)> run_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> pending_;
  std::vector<uint8_t> done_;
  int running_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace ringbench::models
