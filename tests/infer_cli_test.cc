// End-to-end tests of `ringbench infer`: the three LoadGen scenarios on a real (small) network,
// inference's memory against training's, and clear errors for bad input. Runs are cut far below
// LoadGen's minimums, so every result must say INVALID and why. Under a vGPU profile: the
// framebuffer's cap and "does not fit"; k VMs serving at once through `vgpu share -- infer`.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "tests/run_command.h"

namespace ringbench {
namespace {

using namespace ringbench::testing;  // run_command.h
const std::string kBin = RINGBENCH_BIN;
const std::string kQuick = " infer --max-batch 4 --min-queries 0 --threads 1";

TEST(InferCli, ScenariosMemoryAndLoadGenValidity) {
  auto [code, output, doc] = run_json(kBin + kQuick + " --model lenet --min-duration 0.2 --batches 1,4 --server-qps 50 "
                                      "--latency-bound-ms 1000");
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(has_all(output, {"# ringbench infer: lenet", "Offline: batch 4", "SingleStream: p90", "Server: 50.0 QPS",
                               "INVALID (min duration 600 s"}));
  // Said before the runs: Offline's two sizes, SingleStream and one Server run of 0.2 s each.
  EXPECT_TRUE(has_all(output, {"# expected duration: 4 run(s) of at least 0.2 s each (Offline 2 batch size(s), "
                               "SingleStream, Server): at least 0.0 min"}))
      << output;
  EXPECT_EQ(doc["meta"]["allowed_batches"], nlohmann::json({1, 2, 4}));
  const auto& mem = doc["memory"];
  EXPECT_GT(mem["training_mib"].get<double>(), 0);
  EXPECT_LE(mem["inference_over_training"].get<double>(), 0.5) << mem.dump();
  ASSERT_EQ(doc["offline"].size(), 2u);
  for (const auto& o : doc["offline"]) {
    EXPECT_GT(o["samples_per_s"].get<double>(), 0);
    EXPECT_FALSE(o["validity"]["valid"].get<bool>());
  }
  EXPECT_GT(doc["single_stream"]["latency"]["count"].get<int64_t>(), 0);
  const auto& server = doc["server"]["runs"][0];
  EXPECT_EQ(server["target_qps"], 50.0);
  EXPECT_TRUE(server["bound_met"].get<bool>()) << server.dump();  // 1 s for lenet on any machine
}

TEST(InferCli, ServerSearchesThePeak) {
  auto [code, output, doc] = run_json(kBin + kQuick + " --model lenet --scenarios server --min-duration 0.1 "
                                      "--latency-bound-ms 20");
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(has_all(output, {"searching for the highest QPS", "Server peak"})) << output;
  EXPECT_FALSE(doc["server"]["tries"].empty());
  EXPECT_FALSE(doc.contains("offline"));
}

TEST(InferCli, BadOptionsAreClearErrors) {
  EXPECT_TRUE(fails_saying(kBin + kQuick + " --model lenet --batches 8", "--batches: 8 is outside 1..--max-batch (4)"));
  EXPECT_TRUE(fails_saying(kBin + kQuick + " --model lenet --scenarios offline,multistream", "'multistream' is not offline"));
  EXPECT_TRUE(fails_saying(kBin + kQuick + " --model resnet", "resnet"));
  EXPECT_TRUE(fails_saying(kBin + kQuick + " --model lenet --backend onednn --device cuda", "--backend onednn computes on the CPU"));
}

// ---- vGPU profiles (the framebuffer as a cap on the served networks) and k VMs serving at once

TEST(InferCli, ProfileCapsTheServedNetworks) {
  auto [code, output, doc] = run_json(kBin + kQuick + " --model lenet --profile t4-4c --scenarios offline --batches 4 "
                                      "--min-duration 0.1");
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(has_all(output, {"# vGPU profile T4-4C", "MiB framebuffer of T4-4C"})) << output;
  EXPECT_EQ(doc["meta"]["vgpu"]["profile"], "T4-4C");  // the catalog's spelling
  EXPECT_EQ(doc["meta"]["vgpu"]["mode"], "emulated");
  EXPECT_EQ(doc["device"]["cap_mib"], 4096);
  EXPECT_GT(doc["device"]["memory_mib"].get<double>(), 0);
  EXPECT_LT(doc["device"]["memory_mib"].get<double>(), 4096);
  // Training's yardstick is measured without the cap, and no scheduler: no device share.
  EXPECT_GT(doc["memory"]["training_mib"].get<double>(), doc["memory"]["inference_mib"].get<double>());
  EXPECT_FALSE(doc["device"].contains("utilization"));
}

TEST(InferCli, NetworksOverTheFramebufferDoNotFit) {
  // Inception v3 served up to batch 8 at 299 px: its four networks need more than 1 GiB.
  auto [code, output, doc] = run_json(kBin + " infer --threads 1 --model inception_v3 --max-batch 8 --profile P40-1Q");
  ASSERT_EQ(code, 3) << output;
  EXPECT_TRUE(has_all(output, {"ringbench infer: does not fit: inception_v3 up to batch 8 on P40-1Q"})) << output;
  const auto& d = doc["does_not_fit"];
  // The profile, its framebuffer, and more than it needed (as train's record).
  EXPECT_EQ(nlohmann::json({d["profile"], d["framebuffer_mib"], doc["meta"]["model"], doc.contains("offline")}),
            nlohmann::json({"P40-1Q", 1024.0, "inception_v3", false}));
  EXPECT_GT(d["needed_at_least_mib"].get<double>(), 1024.0) << d.dump();
}

TEST(InferCli, BadVgpuOptionsAreClearErrors) {
  EXPECT_TRUE(fails_saying(kBin + kQuick + " --model lenet --profile T4-3C", "T4-4C"));
  EXPECT_TRUE(fails_saying(kBin + kQuick + " --model lenet --timeout 0", "--timeout must be > 0"));
  EXPECT_TRUE(fails_saying(kBin + kQuick + " --model lenet --accuracy --data fashion-mnist --vgpu-scheduler /tmp/s",
                           "takes no --vgpu-scheduler"));
  const std::string share = "OMP_WAIT_POLICY=passive " + kBin + " vgpu share --profile T4-4C --vms 2 -- infer --model lenet";
  EXPECT_TRUE(fails_saying(share + " --json x.json", "the infer options after -- may not set --json"));
  EXPECT_TRUE(fails_saying(share + " --profile T4-8C", "may not set --profile"));
  EXPECT_TRUE(fails_saying(share + " --vgpu-scheduler /tmp/s", "may not set --vgpu-scheduler"));
}

// Two serving VMs time-sliced on one device: each ran its scenarios, held the device part of
// the time, and the totals are the VMs' sums.
TEST(InferCli, ShareServesOnEveryVmAndTotals) {
  const std::string json = temp_path("infer-share") + ".json", logs = temp_path("infer-share-logs");
  const CommandResult r = run_command(
      "OMP_WAIT_POLICY=passive " + kBin + " vgpu share --profile T4-8C --vms 2 --policy equal_share --slice-ms 5 "
      "--json " + json + " --log-dir " + logs + " -- infer --model lenet --max-batch 4 --scenarios offline,server "
      "--batches 4 --min-duration 0.2 --min-queries 0 --threads 1 --latency-bound-ms 200");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_all(r.output, {"2 serving VM(s) of T4-8C", "Total QPS at the p99 bound over 2 VM(s)",
                                 "Total Offline samples/s at batch 4 over 2 VM(s)", "device utilization"}))
      << r.output;
  const auto doc = read_json(json);
  EXPECT_EQ(doc["meta"]["vm_command"], "infer");
  EXPECT_EQ(doc["meta"]["policy"], "equal_share");
  EXPECT_EQ(doc["meta"]["vgpu"]["mode"], "emulated");
  ASSERT_EQ(doc["vms"].size(), 2u);
  double qps = 0, offline = 0;
  for (const auto& v : doc["vms"]) {
    ASSERT_TRUE(v["server"]["found"].get<bool>()) << v["server"].dump();  // 200 ms: lenet on any machine
    qps += v["server"]["peak_qps"].get<double>();
    offline += v["offline"][0]["samples_per_s"].get<double>();
    const double u = v["device"]["utilization"];
    EXPECT_GT(u, 0.0);
    EXPECT_LE(u, 1.0);
    EXPECT_EQ(v["device"]["window_ns"].size(), 2u);
  }
  const auto& s = doc["summary"];
  EXPECT_NEAR(s["qps_at_bound"]["total"].get<double>(), qps, 1e-9 * qps);
  EXPECT_EQ(s["qps_at_bound"]["vms_met"], 2);
  EXPECT_NEAR(s["offline"]["total_samples_per_s"].get<double>(), offline, 1e-9 * offline);
  ASSERT_TRUE(s["device_util_total"].is_number()) << s.dump();
  EXPECT_GT(s["device_util_total"].get<double>(), 0.0);
  EXPECT_LE(s["device_util_total"].get<double>(), 1.0 + 1e-9);
  EXPECT_GT(doc["memory"]["inference_mib"].get<double>(), 0);
  std::remove(json.c_str());
  std::system(("rm -rf " + logs).c_str());
}

TEST(InferCli, ShareOfNetworksThatDoNotFitSaysSo) {
  const std::string json = temp_path("infer-share-nofit") + ".json";
  const CommandResult r = run_command("OMP_WAIT_POLICY=passive " + kBin + " vgpu share --profile P40-1Q --vms 2 --json " +
                                      json + " -- infer --model inception_v3 --max-batch 8 --threads 1");
  ASSERT_EQ(r.exit_code, 3) << r.output;
  EXPECT_EQ(read_json(json)["does_not_fit"]["profile"], "P40-1Q");
  std::remove(json.c_str());
}

}  // namespace
}  // namespace ringbench
