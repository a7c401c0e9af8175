#include "runner/cli/train_input.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "base/errors.h"
#include "runner/job/world.h"

namespace ringbench {

using json = nlohmann::json;  // not in the anonymous namespace: clang -Wshadow, unity batches

namespace {

constexpr size_t kMaxInputNames = 10, kMaxInputNameChars = 1000;

bool is_amount(const json& v) { return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0; }

double sum(const json& a) {
  double s = 0;
  for (const json& v : a) s += v.get<double>();
  return s;
}

// Rank `r`'s record as rank 0 read it from the store: every series `steps` amounts, the counts
// amounts, at most kMaxInputNames names of bounded length.
void check_record(const json& j, const std::string& key, int r, size_t steps) {
  const std::string from = "store key " + key + " (from rank " + std::to_string(r) + "): ";
  if (!j.contains("rank") || j["rank"] != r) throw Error(from + "it is not rank " + std::to_string(r) + "'s record");
  for (const char* k : {"stall_s", "images", "cpu_s", "step_s"}) {
    if (!j.contains(k) || !j[k].is_array() || j[k].size() != steps)
      throw Error(from + "\"" + k + "\" must be an array of " + std::to_string(steps) + " numbers");
    for (const json& v : j[k])
      if (!is_amount(v)) throw Error(from + "\"" + k + "\" holds " + v.dump() + ", not a measurement");
  }
  for (const char* k : {"skipped", "bad_records"})
    if (!j.contains(k) || !j[k].is_number_integer() || j[k].get<int64_t>() < 0)
      throw Error(from + "\"" + k + "\" must be a count");
  if (!j.contains("allow_damaged_data") || !j["allow_damaged_data"].is_boolean())
    throw Error(from + "\"allow_damaged_data\" must be true or false");
  if (!j.contains("skipped_names") || !j["skipped_names"].is_array() || j["skipped_names"].size() > kMaxInputNames)
    throw Error(from + "\"skipped_names\" must be an array of at most " + std::to_string(kMaxInputNames) + " names");
  for (const json& v : j["skipped_names"])
    if (!v.is_string() || v.get<std::string>().size() > kMaxInputNameChars)
      throw Error(from + "\"skipped_names\" holds something that is not a short name");
}

}  // namespace

InputMeter::InputMeter(const input::Pipeline* pipeline) : pipeline_(pipeline) {
  if (pipeline_) last_ = pipeline_->totals();
}

void InputMeter::step_done(bool measuring, double step_s) {
  if (!pipeline_) return;
  const input::PipelineTotals now = pipeline_->totals();
  if (measuring) {
    stall_s_.push_back(now.stall_s - last_.stall_s);
    cpu_s_.push_back(now.cpu_s - last_.cpu_s);
    images_.push_back(now.images - last_.images);
    step_s_.push_back(step_s);
  }
  last_ = now;
}

json InputMeter::rank_json(int rank) const {
  json names = json::array();
  for (const std::string& s : last_.skipped_names) names.push_back(s.substr(0, kMaxInputNameChars));
  return {{"rank", rank},           {"stall_s", stall_s_},         {"images", images_},
          {"cpu_s", cpu_s_},        {"step_s", step_s_},           {"skipped", last_.skipped},
          {"bad_records", last_.bad_records}, {"skipped_names", names},
          {"allow_damaged_data", pipeline_->allow_damaged()}};
}

json InputMeter::config_json() const {
  const input::PipelineOptions& o = pipeline_->options();
  return {{"set", pipeline_->set().describe()}, {"threads", o.threads}, {"prefetch_batches", o.prefetch},
          {"image_size", o.image_size}, {"steps_per_epoch", pipeline_->steps_per_epoch()}};
}

json gather_input(Store& store, int rank, int n, const InputMeter& meter, size_t steps,
                  std::chrono::milliseconds timeout) {
  if (!meter.active()) return json();
  store.set("train/input/" + std::to_string(rank), meter.rank_json(rank).dump());
  if (rank != 0) return json();
  json ranks = json::array();
  double stall_mean = 0, stall_max = 0, img_s = 0, cpus = 0;
  int64_t skipped = 0, bad = 0;
  bool damage_allowed = false;
  for (int r = 0; r < n; ++r) {
    const std::string key = "train/input/" + std::to_string(r);
    json j = get_rank_json(store, key, r, timeout);
    check_record(j, key, r, steps);
    const double wall = sum(j["step_s"]), stall = steps ? sum(j["stall_s"]) / double(steps) : 0;
    j["stall_s_per_step"] = stall;
    j["images_per_s"] = wall > 0 ? sum(j["images"]) / wall : 0.0;
    j["pipeline_cpus"] = wall > 0 ? sum(j["cpu_s"]) / wall : 0.0;
    stall_mean += stall / n;
    stall_max = std::max(stall_max, stall);
    img_s += j["images_per_s"].get<double>() / n;
    cpus += j["pipeline_cpus"].get<double>() / n;
    skipped += j["skipped"].get<int64_t>();
    bad += j["bad_records"].get<int64_t>();
    damage_allowed = damage_allowed || j["allow_damaged_data"].get<bool>();
    ranks.push_back(j);
  }
  return {{"config", meter.config_json()},
          {"stall_s_per_step", {{"mean_over_ranks", stall_mean}, {"max_over_ranks", stall_max}}},
          {"images_per_s_per_rank", img_s},
          {"pipeline_cpus_per_rank", cpus},
          {"skipped", skipped},
          {"bad_records", bad},
          {"allow_damaged_data", damage_allowed},
          {"ranks", ranks}};
}

void print_input(const json& s) {
  if (s.is_null()) return;
  std::printf("# input pipeline: waited %.1f ms a step for its batch (mean over ranks; slowest rank %.1f ms), "
              "decoded %.1f img/s per rank with %.2f CPUs per rank; %lld failed reads or decodes skipped (%lld "
              "images)\n",
              1e3 * s["stall_s_per_step"]["mean_over_ranks"].get<double>(),
              1e3 * s["stall_s_per_step"]["max_over_ranks"].get<double>(), s["images_per_s_per_rank"].get<double>(),
              s["pipeline_cpus_per_rank"].get<double>(), (long long)s["skipped"].get<int64_t>(),
              (long long)s["bad_records"].get<int64_t>());
  if (s["allow_damaged_data"].get<bool>() && s["bad_records"].get<int64_t>() > 0)
    std::printf("# DAMAGED DATA: trained without %lld records that could not be read or decoded "
                "(--allow-damaged-data)\n", (long long)s["bad_records"].get<int64_t>());
  for (const json& r : s["ranks"])
    for (const json& name : r["skipped_names"])
      std::printf("# skipped (rank %d): %s\n", r["rank"].get<int>(), name.get<std::string>().c_str());
}

}  // namespace ringbench
