#include "models/timeline.h"

#include <nlohmann/json.hpp>

namespace ringbench::models {

Timeline::Timeline(int rank, Clock::time_point origin) : rank_(rank), origin_(origin) {}

void Timeline::name_track(int track, const std::string& name) {
  std::lock_guard lk(mu_);
  for (auto& t : tracks_)
    if (t.first == track) return void(t.second = name);  // renamed (the trainer, once it knows the wire)
  tracks_.emplace_back(track, name);
}

void Timeline::add(int track, const std::string& name, const char* category,
                   Clock::time_point begin, Clock::time_point end) {
  const double ts = std::chrono::duration<double, std::micro>(begin - origin_).count();
  const double dur = std::chrono::duration<double, std::micro>(end - begin).count();
  std::lock_guard lk(mu_);
  events_.push_back({track, name, category, ts, dur});
}

size_t Timeline::size() const {
  std::lock_guard lk(mu_);
  return events_.size();
}

std::string Timeline::to_json() const {
  std::lock_guard lk(mu_);
  nlohmann::json ev = nlohmann::json::array();
  ev.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank_},
                {"args", {{"name", "rank " + std::to_string(rank_)}}}});
  for (const auto& [track, name] : tracks_) {
    ev.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank_}, {"tid", track},
                  {"args", {{"name", name}}}});
    ev.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", rank_}, {"tid", track},
                  {"args", {{"sort_index", track}}}});
  }
  for (const Event& e : events_)
    ev.push_back({{"name", e.name}, {"cat", e.category}, {"ph", "X"}, {"pid", rank_},
                  {"tid", e.track}, {"ts", e.ts_us}, {"dur", e.dur_us}});
  return nlohmann::json{{"traceEvents", ev}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace ringbench::models
