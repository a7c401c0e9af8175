// What rank 0 reads back from the store for a training rank's measured steps is checked before
// use: a forged or missing value is an error naming its key and sender, never a wrong summary.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/errors.h"
#include "collectives/store.h"
#include "runner/cli/train_results.h"

namespace ringbench {
namespace {

using json = nlohmann::json;
const Millis kTimeout{2000};

std::vector<models::StepRecord> two_steps() {
  std::vector<models::StepRecord> steps(2);
  for (auto& s : steps) s.step_s = 0.01, s.compute_s = 0.008, s.cpu_s = 0.015, s.loss = 2.3;
  return steps;
}

// Rank 1 publishes its record (n = 0: it reads nobody's); `forge` may then rewrite it; rank 0
// gathers both. Returns rank 0's error, or "" with the gathered records in `out`.
std::string gather_with(const std::function<void(json&)>& forge, std::vector<json>* out = nullptr) {
  InProcStore store;
  gather_steps(store, 1, 0, two_steps(), 0.75, 8, kTimeout);
  json r1 = json::parse(store.get("train/steps/1", kTimeout));
  forge(r1);
  store.set("train/steps/1", r1.dump());
  try {
    auto ranks = gather_steps(store, 0, 2, two_steps(), 1.5, 8, kTimeout);
    if (out) *out = ranks;
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TrainRecords, EachRanksCpusBusyComesBackAndAverages) {
  std::vector<json> ranks;
  ASSERT_EQ(gather_with([](json&) {}, &ranks), "");
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_DOUBLE_EQ(ranks[0]["cpus_busy"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(ranks[1]["cpus_busy"].get<double>(), 0.75);
  EXPECT_EQ(ranks[1]["cpu_s"], json({0.015, 0.015}));
  const json s = summarize(ranks, two_steps(), VgpuSetup{}, 0, {});
  EXPECT_DOUBLE_EQ(s["cpus_busy_per_rank"].get<double>(), 1.125);
  EXPECT_EQ(s["cpus_busy_min_max"], json({0.75, 1.5}));
  EXPECT_DOUBLE_EQ(s["cpu_s"]["mean_over_ranks"].get<double>(), 0.015);
}

TEST(TrainRecords, ForgedCpuFiguresNameTheKeyAndSender) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // NaN reaches the store as null (JSON has no NaN); json() stands for a missing key.
  for (const json& bad : {json(-1.0), json(nan), json(1e9), json("2"), json()}) {
    const std::string e = gather_with([&](json& r) {
      if (bad.is_null()) r.erase("cpus_busy"); else r["cpus_busy"] = bad;
    });
    EXPECT_NE(e.find("store key train/steps/1 (from rank 1)"), std::string::npos) << bad.dump() << ": " << e;
    EXPECT_NE(e.find("\"cpus_busy\""), std::string::npos) << e;
  }
  const std::string e = gather_with([](json& r) { r["cpu_s"][1] = -0.5; });
  EXPECT_NE(e.find("\"cpu_s\" holds -0.5, not a measurement"), std::string::npos) << e;
  EXPECT_NE(gather_with([](json& r) { r["cpu_s"].erase(1); }).find("\"cpu_s\" must be an array of 2"), std::string::npos);
}

}  // namespace
}  // namespace ringbench
