// models::SideThread, the oneDNN backward's second thread: tasks run in the order posted,
// done() turns true once a task has run, finish() runs what has not started on the caller and
// waits for the rest, and a task's exception reaches the caller.
#include "models/side_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace ringbench::models {
namespace {

TEST(SideThread, RunsInOrderAndTheCallerTakesOverAtTheEnd) {
  std::mutex mu;
  std::vector<int> order, lanes(8, -1);
  std::atomic<bool> release{false}, started{false}, inited{false};
  SideThread side(
      [&](int task, int lane) {
        if (task == 0) {  // hold the side thread so that the caller takes the rest over
          started = true;
          while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(task);
        lanes[size_t(task)] = lane;
      },
      [&] { inited = true; });
  for (int pass = 0; pass < 3; ++pass) {
    release = started = false;
    order.clear();
    lanes.assign(8, -1);
    side.begin(8);
    for (int t = 0; t < 8; ++t) side.post(t);
    while (!started) std::this_thread::yield();
    std::thread later([&] {  // lets task 0 end once the caller has run the others
      for (;;) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (order.size() == 7) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      release = true;
    });
    side.finish();  // the caller runs tasks 1.. while task 0 holds the side thread
    later.join();
    for (int t = 0; t < 8; ++t) EXPECT_TRUE(side.done(t)) << t;
    ASSERT_EQ(order.size(), 8u);
    EXPECT_EQ(lanes[0], 1);  // task 0 on the side thread, the rest here, in order
    for (int t = 1; t < 8; ++t) EXPECT_EQ(lanes[size_t(t)], 0) << t;
    EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 0}));
  }
  EXPECT_TRUE(inited);
}

TEST(SideThread, TasksRunOnlyOnceAndDoneSaysSo) {
  std::vector<std::atomic<int>> runs(100);
  SideThread side([&](int task, int) { ++runs[size_t(task)]; }, {});
  side.begin(100);
  for (int t = 0; t < 100; ++t) side.post(t);
  side.finish();
  for (int t = 0; t < 100; ++t) EXPECT_EQ(runs[size_t(t)], 1) << t;
  side.begin(3);
  EXPECT_FALSE(side.done(2));  // a new pass starts with nothing done
  side.finish();               // nothing posted: returns at once
}

TEST(SideThread, ATasksErrorReachesTheCallerOnce) {
  SideThread side(
      [](int task, int) {
        if (task == 1) throw std::runtime_error("task 1 failed");
      },
      {});
  side.begin(3);
  for (int t = 0; t < 3; ++t) side.post(t);
  try {
    side.finish();
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "task 1 failed");
  }
  side.begin(3);
  side.post(0);
  EXPECT_NO_THROW(side.finish());  // the next pass starts clean
}

}  // namespace
}  // namespace ringbench::models
