// How long an inference scenario runs, and whether what it measured is a valid result under
// MLPerf Inference LoadGen's rules.
//
// LoadGen's published minimums (mlcommons/inference, mlperf.conf as of commit acf032a0,
// 2021-01-20 "10 minutes is the new minimal duration"; the rules document
// mlcommons/inference_policies inference_rules.adoc, section "Scenarios"):
//   every scenario      min_duration 600 s (600000 ms)
//   SingleStream        min_query_count 1024
//   Server              min_query_count 270336 (= 33 * 2^13: the rules' "Inferences" for a 99th
//                       percentile at 99% confidence and 0.05% margin of error)
//   Offline             24576 samples (= 3 * 2^13; "At least 24,576" samples in its one query)
// Since v3.1 (mlperf.conf, commit 995ffee3, 2023-06-07) SingleStream and Server drop their
// minimum query counts in favour of early stopping (inference_rules.adoc, "Early Stopping
// Criterion"); ringbench keeps the fixed counts, which need no statistics to judge.
//
// A run keeps issuing until both its minimum duration and its minimum count are met, as LoadGen
// does (test_settings.h: "The test runs until both min duration and min query count have been
// met"), and issues nothing after max_duration_s, its cap (LoadGen's max_duration_ms, whose
// default 0 is no cap; ours is an hour, so that nothing hangs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringbench::infer {

enum class Scenario { SingleStream, Server, Offline };
const char* scenario_name(Scenario s);  // "SingleStream", "Server", "Offline"

struct RunRules {
  double min_duration_s = 600;
  int64_t min_count = 0;         // queries (Offline: samples)
  double max_duration_s = 3600;  // the cap: nothing is issued after it
  void check() const;            // Error unless 0 <= min_duration_s <= max_duration_s, min_count >= 0
};

// LoadGen's minimums for the scenario (above), with our one-hour cap.
RunRules loadgen_rules(Scenario s);

// What a run measured, in LoadGen's terms (results.cc, MinDurationMet): its duration is the
// last query's issue time for SingleStream, the last query's scheduled arrival for Server, and
// the last sample's completion for Offline, each from the run's start.
struct Measured {
  double duration_s = 0;
  int64_t count = 0;     // queries (Offline: samples)
  bool capped = false;   // stopped by max_duration_s before its own minimums were met
};

// VALID, or INVALID with what fell short: "INVALID (min duration 600 s, min queries 1024)".
struct Validity {
  std::vector<std::string> reasons;  // empty: valid
  bool valid() const { return reasons.empty(); }
  std::string text() const;
  nlohmann::json to_json() const;    // {"valid": bool, "reasons": [...]}
};

// Against LoadGen's minimums for the scenario (not the run's own, which may be smaller), and
// the cap.
Validity check_loadgen_rules(Scenario s, const RunRules& rules, const Measured& m);

}  // namespace ringbench::infer
