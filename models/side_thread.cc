#include "models/side_thread.h"

#include <utility>

namespace ringbench::models {

SideThread::SideThread(std::function<void(int, int)> run, const std::function<void()>& init) : run_(std::move(run)) {
  thread_ = std::thread([this, init] {
    if (init) init();
    loop();
  });
}

SideThread::~SideThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SideThread::begin(size_t tasks) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.clear();
  done_.assign(tasks, 0);
  error_ = nullptr;
}

void SideThread::post(int task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(task);
  }
  cv_.notify_all();
}

bool SideThread::done(int task) {
  std::lock_guard<std::mutex> lock(mu_);
  return done_.at(size_t(task)) != 0;
}

// Called with `lock` held and a task pending: runs it unlocked.
void SideThread::run_one(std::unique_lock<std::mutex>& lock, int lane) {
  const int task = pending_.front();
  pending_.pop_front();
  ++running_;
  lock.unlock();
  std::exception_ptr error;
  try {
    run_(task, lane);
  } catch (...) {
    error = std::current_exception();
  }
  lock.lock();
  --running_;
  done_.at(size_t(task)) = 1;
  if (error && !error_) error_ = error;
  cv_.notify_all();
}

void SideThread::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !pending_.empty(); });
    if (stop_) return;
    run_one(lock, 1);
  }
}

void SideThread::finish() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (!pending_.empty()) {
      run_one(lock, 0);
    } else if (running_ > 0) {
      cv_.wait(lock, [this] { return !pending_.empty() || running_ == 0; });
    } else {
      break;
    }
  }
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace ringbench::models
