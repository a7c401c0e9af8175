// End-to-end tests of vGPU profiles on the command line: `ringbench train --profile` (the
// framebuffer as a cap on the backend's memory, "does not fit" as a result with its numbers),
// and `ringbench vgpu profiles | detect | share` (k VMs time-sliced on one device).
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/run_command.h"

namespace ringbench {
namespace {

using namespace ringbench::testing;  // run_command.h
const std::string kBin = "OMP_WAIT_POLICY=passive " + std::string(RINGBENCH_BIN);

TEST(VgpuCli, ProfilesListsTheCatalogWithItsSource) {
  auto r = run_command(kBin + " vgpu profiles");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"# source:", "T4-4C", "P40-24Q", "passthrough", "bare-metal"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s << "\n" << r.output;
}

TEST(VgpuCli, DetectWithoutADriverSaysNone) {
  auto r = run_command(kBin + " vgpu detect");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto doc = nlohmann::json::parse(r.output);
  if (doc["source"] != "none") GTEST_SKIP() << "this machine has an NVIDIA driver: " << r.output;
  EXPECT_EQ(doc["kind"], "none");
  EXPECT_FALSE(doc["note"].get<std::string>().empty());
}

TEST(VgpuCli, EmulatedProfileCapsMemoryAndRecordsIt) {
  auto [code, output, doc] =
      run_json(kBin + " train --model lenet --batch 8 --steps 2 --warmup 1 --log-every 0 --profile t4-4c");
  ASSERT_EQ(code, 0) << output;
  EXPECT_TRUE(has_all(output, {"# vGPU profile T4-4C", "MiB framebuffer of T4-4C"}));
  EXPECT_EQ(doc["meta"]["vgpu"]["profile"], "T4-4C");  // the catalog's spelling
  EXPECT_EQ(doc["meta"]["vgpu"]["framebuffer_mib"], 4096);
  const std::string mode = doc["meta"]["vgpu"]["mode"];
  EXPECT_TRUE(mode == "emulated") << mode;
  const double peak = doc["summary"]["device_memory"]["peak_mib"];
  // LeNet's parameters, gradients and momentum alone are 3 x 6.3 MiB.
  EXPECT_GT(peak, 3 * 6.3);
  EXPECT_LT(peak, 4096);
}

TEST(VgpuCli, ModelOverTheFramebufferDoesNotFit) {
  // Inception v3 at batch 64 needs several GiB of activations: a 1 GiB profile cannot hold it,
  // and it fails while allocating, before any step runs.
  auto [code, output, doc] =
      run_json(kBin + " train --model inception_v3 --batch 64 --steps 1 --warmup 0 --profile P40-1Q");
  ASSERT_EQ(code, 3) << output;
  EXPECT_NE(output.find("does not fit"), std::string::npos) << output;
  const auto& d = doc["does_not_fit"];
  EXPECT_EQ(d["profile"], "P40-1Q");
  EXPECT_DOUBLE_EQ(d["framebuffer_mib"].get<double>(), 1024.0);
  EXPECT_GT(d["needed_at_least_mib"].get<double>(), 1024.0);
  EXPECT_LE(d["in_use_mib"].get<double>(), 1024.0);
  EXPECT_GT(d["requested_mib"].get<double>(), 0.0);
  EXPECT_FALSE(doc.contains("summary"));
}

TEST(VgpuCli, BadProfilesAreClearErrors) {
  auto r = run_command(kBin + " train --model lenet --steps 1 --profile T4-3C");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("T4-4C"), std::string::npos) << "should suggest T4's profiles: " << r.output;
  r = run_command(kBin + " vgpu share --profile T4-8C --vms 3 -- --model lenet");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("at most 2"), std::string::npos) << r.output;
  r = run_command(kBin + " vgpu share --profile T4-4C --policy fair -- --model lenet");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("fixed_share"), std::string::npos) << r.output;
  r = run_command(kBin + " vgpu share --profile T4-4C -- --model lenet --json x.json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("may not set --json"), std::string::npos) << r.output;
}

// Two VMs time-sliced on one device: both train, each held the device part of the time, and
// the device was never held by both at once (total utilization at most 100%, plus rounding).
// Few steps on purpose: the VMs measure together by construction, not by running long.
// The shares themselves are checked against the policies in vgpu_scheduler_test.
TEST(VgpuCli, ShareRunsEveryVmAndAccountsTheDevice) {
  const std::string json = temp_path("share") + ".json", logs = temp_path("share-logs");
  auto r = run_command(kBin + " vgpu share --profile T4-8C --vms 2 --policy equal_share --slice-ms 5 "
                       "--json " + json + " --log-dir " + logs +
                       " -- --model lenet --batch 8 --steps 6 --warmup 1 --threads 1 --log-every 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Total img/sec over 2 VM(s)"), std::string::npos) << r.output;
  auto doc = read_json(json);
  EXPECT_EQ(doc["meta"]["policy"], "equal_share");
  EXPECT_EQ(doc["meta"]["max_instances"], 2);
  ASSERT_EQ(doc["vms"].size(), 2u);
  double sum = 0;
  int64_t fewest_tail_steps = INT64_MAX;
  for (const auto& v : doc["vms"]) {
    fewest_tail_steps = std::min(fewest_tail_steps, v["tail_steps"].get<int64_t>());
    EXPECT_GT(v["img_s"]["mean"].get<double>(), 0);
    const double u = v["device_util"];
    EXPECT_GT(u, 0.0);
    EXPECT_LE(u, 1.0);
    sum += v["img_s"]["mean"].get<double>();
  }
  // The VMs measure together (vgpu/measure_barrier.h), however slow the host: the last VM to
  // finish measuring ran no unmeasured tail steps, and the device's total over the window where
  // they all ran is known.
  EXPECT_EQ(fewest_tail_steps, 0);
  EXPECT_NEAR(doc["summary"]["total_img_s"]["mean"].get<double>(), sum, 1e-6 * sum);
  ASSERT_TRUE(doc["summary"]["device_util_total"].is_number()) << doc.dump(2);
  EXPECT_GT(doc["summary"]["device_util_total"].get<double>(), 0.0);
  EXPECT_LE(doc["summary"]["device_util_total"].get<double>(), 1.0 + 1e-9);
  EXPECT_EQ(doc["meta"]["vgpu"]["mode"], "emulated");
  std::remove(json.c_str());
  std::system(("rm -rf " + logs).c_str());
}

TEST(VgpuCli, ShareOfAModelThatDoesNotFitSaysSo) {
  const std::string json = temp_path("share-nofit") + ".json";
  auto r = run_command(kBin + " vgpu share --profile P40-1Q --vms 2 --json " + json +
                       " -- --model inception_v3 --batch 64 --steps 1 --warmup 0");
  ASSERT_EQ(r.exit_code, 3) << r.output;
  auto doc = read_json(json);
  EXPECT_EQ(doc["does_not_fit"]["profile"], "P40-1Q");
  std::remove(json.c_str());
}

}  // namespace
}  // namespace ringbench
