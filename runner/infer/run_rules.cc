#include "runner/infer/run_rules.h"

#include <cstdio>

#include "base/errors.h"
#include "base/name_table.h"

namespace ringbench::infer {

namespace {
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace

constexpr EnumName<Scenario> kScenarioNames[] = {
    {Scenario::SingleStream, "SingleStream"}, {Scenario::Server, "Server"}, {Scenario::Offline, "Offline"}};

const char* scenario_name(Scenario s) { return name_of(kScenarioNames, s, "?"); }

void RunRules::check() const {
  if (!(min_duration_s >= 0) || !(max_duration_s >= min_duration_s) || min_count < 0)
    throw Error("run rules: need 0 <= min duration (" + number(min_duration_s) + " s) <= max duration (" +
                number(max_duration_s) + " s) and a minimum count >= 0 (" + std::to_string(min_count) + ")");
}

RunRules loadgen_rules(Scenario s) {
  switch (s) {
    case Scenario::SingleStream: return {.min_duration_s = 600, .min_count = 1024};
    case Scenario::Server: return {.min_duration_s = 600, .min_count = 270336};
    case Scenario::Offline: return {.min_duration_s = 600, .min_count = 24576};
  }
  throw Error("run rules: unknown scenario");
}

std::string Validity::text() const {
  if (valid()) return "VALID";
  std::string out = "INVALID (";
  for (size_t i = 0; i < reasons.size(); ++i) out += (i ? ", " : "") + reasons[i];
  return out + ")";
}

nlohmann::json Validity::to_json() const { return {{"valid", valid()}, {"reasons", reasons}}; }

Validity check_loadgen_rules(Scenario s, const RunRules& rules, const Measured& m) {
  const RunRules loadgen = loadgen_rules(s);
  const char* unit = s == Scenario::Offline ? "samples" : "queries";
  Validity v;
  if (m.duration_s < loadgen.min_duration_s)
    v.reasons.push_back("min duration " + number(loadgen.min_duration_s) + " s");
  if (m.count < loadgen.min_count)
    v.reasons.push_back("min " + std::string(unit) + " " + std::to_string(loadgen.min_count));
  if (m.capped) v.reasons.push_back("stopped at max duration " + number(rules.max_duration_s) + " s");
  return v;
}

}  // namespace ringbench::infer
