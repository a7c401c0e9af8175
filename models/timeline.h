// A Chrome trace-event timeline (chrome://tracing, Perfetto) of one rank: forward and backward
// per layer on the compute track, each gradient bucket's allreduce on a track of its own, and
// the steps. Events are kept in memory (thread-safe) and serialised once at the end.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace ringbench::models {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Timeline(int rank, Clock::time_point origin = Clock::now());
  void name_track(int track, const std::string& name);  // track 0 is "compute"
  void add(int track, const std::string& name, const char* category, Clock::time_point begin,
           Clock::time_point end);
  std::string to_json() const;  // {"traceEvents": [...], "displayTimeUnit": "ms"}
  size_t size() const;

 private:
  struct Event {
    int track;
    std::string name;
    const char* category;
    double ts_us, dur_us;
  };
  int rank_;
  Clock::time_point origin_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
  std::vector<std::pair<int, std::string>> tracks_;
};

}  // namespace ringbench::models
