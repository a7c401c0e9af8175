// A tiny sweep of every remote setup (issue 41) end to end through real device servers and
// clients on this machine: the records, the traffic and the report's section. Like sweep_test, not
// run under the sanitizers (nosan): the sweep's child processes are the sanitized build's.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "runner/sweep/remote_sweep.h"
#include "runner/sweep/sweep_config.h"
#include "tests/report_fixture.h"

namespace ringbench {
namespace {

using json = nlohmann::json;

// Every setup through real device servers on this machine (a local cluster: loopback, the link
// by the server's shaping proxy), LeNet for 3 steps.
TEST(RemoteSweep, ATinySweepOfEverySetupRunsEndToEnd) {
  const std::string dir = ringbench::testing::temp_path("remote-sweep");
  const auto r = ringbench::testing::run_sweep(RINGBENCH_BIN,
                                               "name: rt\nrepeats: 1\ntimeout: 120\n"
                                               "cluster: {type: local, cpus_per_node: 1, latency_us: 200}\n"
                                               "remote:\n  model: {model: lenet, batch: 4}\n  warmup: 1\n  steps: 2\n"
                                               "  threads: 1\n  clients: [2]\n  transports: [tcp, verbs]\n"
                                               "  links: [{gbps: 1}]\n",
                                               dir, "OMP_WAIT_POLICY=passive");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, json> by_point;
  for (const json& rec : ringbench::testing::read_raw(dir)) by_point[rec["point"]] = rec;
  ASSERT_EQ(by_point.size(), 5u);
  for (const auto& [id, rec] : by_point) {
    if (id.find("/verbs/") != std::string::npos) {
      EXPECT_EQ(rec["status"], "skipped");
      EXPECT_NE(rec["error"].get<std::string>().find("would bypass it"), std::string::npos) << rec.dump();
      continue;
    }
    ASSERT_EQ(rec["status"], "ok") << id << ": " << rec.dump();
    EXPECT_GT(rec["remote"]["summary"]["total_img_s"]["mean"].get<double>(), 0) << id;
    if (rec["setup"] == "local_device") {
      EXPECT_TRUE(rec["remote"]["per_step"].is_null());
      continue;
    }
    EXPECT_TRUE(rec["remote"]["device"]["emulated"].get<bool>()) << id;
    EXPECT_EQ(rec["remote"]["per_step"]["round_trips"], 5) << id;
    // The parameters up and their gradients down, each more than LeNet's 1.66 M floats.
    EXPECT_GT(rec["remote"]["per_step"]["sent_bytes"].get<double>(), 1.6e6 * 4) << id;
    EXPECT_GT(rec["remote"]["per_step"]["received_bytes"].get<double>(), 1.6e6 * 4) << id;
  }
  EXPECT_EQ(by_point["remote/lenet/b4/partial/k2"]["remote"]["clients"].size(), 2u);
  // A failure names the process and its log (the ranks' logs are not a remote point's).
  SweepPoint k2;
  k2.kind = PointKind::remote;
  k2.setup = "partial";
  using Named = std::pair<std::string, std::string>;
  EXPECT_EQ(remote_process(k2, 0, "L"), (Named{"the device server", "L.server.log"}));
  EXPECT_EQ(remote_process(k2, 2, "L"), (Named{"client 1", "L.client1.log"}));
  EXPECT_EQ(by_point["remote/lenet/b4/tcp/1gbit/200us"]["remote"]["link"]["latency_us"], 200);
  const std::string md = report_testing::section(report_testing::read_file(dir + "/report.md"), "## Remote GPU");
  EXPECT_TRUE(ringbench::testing::has_all(md, {"### lenet b4", "**EMULATED**", "local partials: 2 clients",
                                               "tcp, 1 Gbit/s, 200 us", "requests over verbs would bypass it"}))
      << md;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ringbench
