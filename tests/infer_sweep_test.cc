// End to end: a sweep of a tiny infer config (LeNet, runs of a fraction of a second) with the
// real binary: its raw.jsonl records, the report's Inference section, and the report
// regenerated from raw.jsonl alone; alone and as 2 VMs sharing a device under a vGPU profile.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/run_command.h"

namespace ringbench {
namespace {

using json = nlohmann::json;
using testing::has_all;
using testing::run_command;
using testing::read_text;
using testing::temp_path;
namespace fs = std::filesystem;
const std::string kBin = RINGBENCH_BIN;

TEST(InferSweep, TinyLenetConfigEndToEnd) {
  const std::string dir = temp_path("infer-run"), cfg = temp_path("infer") + ".yaml";
  std::ofstream(cfg) << "name: tiny-infer\nnodes: [1]\nrepeats: 1\ntimeout: 120\ncluster: {type: local}\n"
                        "infer:\n  models: [{model: lenet, max_batch: 4}]\n  batches: [1, 4]\n"
                        "  latency_bound_ms: 100\n  server_qps: 50\n  min_duration: 0.2\n  min_queries: 8\n";
  auto r = run_command(kBin + " sweep " + cfg + " --out " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[1/1] infer/lenet/b4/none r1: ok"), std::string::npos) << r.output;

  std::ifstream f(dir + "/raw.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(f, line));
  const json rec = json::parse(line);
  EXPECT_EQ(rec["kind"], "infer");
  EXPECT_EQ(rec["status"], "ok") << rec.dump();
  EXPECT_EQ(rec["batch"], 4);
  ASSERT_EQ(rec["infer"]["offline"].size(), 2u) << rec.dump();
  EXPECT_GT(rec["infer"]["offline"][1]["samples_per_s"].get<double>(), 0);
  EXPECT_FALSE(rec["infer"]["offline"][0]["validity"]["valid"].get<bool>());  // far below LoadGen's 600 s
  EXPECT_GT(rec["infer"]["single_stream"]["latency"]["p90_s"].get<double>(), 0);
  EXPECT_EQ(rec["infer"]["server"]["runs"].size(), 1u);
  EXPECT_EQ(rec["infer"]["meta"]["input"], "1x28x28");
  const auto& cmd = rec["command"];
  EXPECT_NE(std::find(cmd.begin(), cmd.end(), "--threads"), cmd.end()) << cmd.dump();

  const std::string report = read_text(dir + "/report.md");
  EXPECT_TRUE(has_all(report, {"## Inference", "### lenet, batches up to 4 (infer/lenet/b4/none)",
                               "| 4 | ", "INVALID (min duration 600 s", "SingleStream", "Server at one rate"}));
  EXPECT_TRUE(testing::report_regenerates(kBin, dir));
  if (!HasFailure()) fs::remove_all(dir);
}

// The same under a time-sliced profile, alone and as 2 VMs serving at once under fixed share:
// each VM's results in raw.jsonl, the report's QPS at the p99 bound per profile and policy.
TEST(InferSweep, TwoVmsServingAtOnceEndToEnd) {
  const std::string dir = temp_path("infer-share-run"), cfg = temp_path("infer-share") + ".yaml";
  std::ofstream(cfg) << "name: tiny-infer-share\nnodes: [1]\nrepeats: 1\ntimeout: 120\ncluster: {type: local}\n"
                        "infer:\n  models: [{model: lenet, max_batch: 4}]\n  scenarios: [offline, server]\n"
                        "  latency_bound_ms: 200\n  server_qps: 50\n  min_duration: 0.2\n  min_queries: 8\n"
                        "  profiles: [T4-8C]\n  sharing: {vms_per_gpu: 2, policy: fixed_share}\n";
  auto r = run_command("OMP_WAIT_POLICY=passive " + kBin + " sweep " + cfg + " --out " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_all(r.output, {"[1/3] infer/lenet/b4/T4-8C r1: ok",
                                 "[3/3] infer/lenet/b4/T4-8C/fixed_share/vms2 r1: ok"})) << r.output;
  std::ifstream f(dir + "/raw.jsonl");
  json shared;
  for (std::string line; std::getline(f, line);) shared = json::parse(line);  // the last: 2 VMs
  EXPECT_EQ(shared["status"], "ok") << shared.dump();
  EXPECT_EQ(shared["policy"], "fixed_share");
  EXPECT_EQ(shared["vms"], 2);
  ASSERT_EQ(shared["infer"]["vms"].size(), 2u) << shared.dump();
  for (const auto& vm : shared["infer"]["vms"]) {
    EXPECT_EQ(vm["offline"].size(), 1u);  // at the largest batch only
    EXPECT_EQ(vm["offline"][0]["batch"], 4);
    EXPECT_GT(vm["device"]["utilization"].get<double>(), 0);
  }
  EXPECT_EQ(shared["infer"]["meta"]["vgpu"]["mode"], "emulated");
  const std::string report = read_text(dir + "/report.md");
  EXPECT_TRUE(has_all(report, {"### QPS at the p99 bound per profile and policy",
                               "| lenet b4 | T4-8C | none (alone) | 1 |", "| lenet b4 | T4-8C | fixed_share | 2 |",
                               "Offline samples/s per VM"}));
  EXPECT_TRUE(testing::report_regenerates(kBin, dir));
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace ringbench
