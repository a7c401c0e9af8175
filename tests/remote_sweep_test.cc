// Sweeps' remote section (issue 41, VMware's Bitfusion setups): configs/remote-gpu.yaml parses to
// the study's points, mistakes name their key, and the report's "Remote GPU" section renders from
// a fixture with numbers computed by hand (predict's remote model and its what-if included), the
// same bytes twice. End to end: remote_sweep_e2e_test.cc.
#include <gtest/gtest.h>

#include <filesystem>

#include "runner/predict/remote_model.h"
#include "runner/predict/remote_whatif.h"
#include "runner/analysis/run.h"
#include "runner/sweep/sweep_config.h"
#include "tests/report_fixture.h"
#include "tests/sweep_config_errors.h"

namespace ringbench {
namespace {

using json = nlohmann::json;
using testing::expect_error;
using testing::local_config;

std::vector<std::string> ids(const SweepConfig& c) {
  std::vector<std::string> v;
  for (const auto& p : expand_points(c))
    if (p.repeat == 1) v.push_back(p.id);
  return v;
}

TEST(RemoteSweepConfig, TheShippedConfigIsVmwaresThreeSetups) {
  const SweepConfig c = load_sweep_config(std::string(RINGBENCH_SOURCE_DIR) + "/configs/remote-gpu.yaml");
  ASSERT_TRUE(c.has_remote);
  EXPECT_EQ(c.cluster.type, "emulated");
  const auto v = ids(c);
  const std::string base = "remote/mobilenet_v1/b8/s64/";
  ASSERT_GE(v.size(), 5u);
  EXPECT_EQ(v[0], base + "local_device");
  EXPECT_EQ(v[1], base + "loopback");
  EXPECT_EQ(v[2], base + "partial/k2");
  EXPECT_EQ(v[3], base + "partial/k4");
  EXPECT_EQ(v[4], base + "tcp/10gbit/50us");  // cluster.latency_us where a link gives none
  EXPECT_NE(std::find(v.begin(), v.end(), base + "verbs/10gbit/50us"), v.end());
  EXPECT_EQ(cluster_nodes(c), 2);  // the link's server on node 1, its client on node 0
  for (const auto& p : expand_points(c)) {
    // Its verbs links are shaped, by a proxy that forwards TCP bytes: skipped, saying so.
    EXPECT_EQ(remote_unavailable(p).empty(), p.transport != "verbs") << p.id;
    EXPECT_EQ(p.nodes, p.setup == "link" ? 2 : 1) << p.id;
  }
  SweepPoint unshaped;
  unshaped.kind = PointKind::remote;
  unshaped.setup = "link";
  unshaped.transport = "verbs";
  unshaped.latency_us = 0;
  EXPECT_EQ(remote_unavailable(unshaped), "");  // runs where an RDMA device exists (else the backend's check skips it)
  unshaped.latency_us = 50;
  EXPECT_NE(remote_unavailable(unshaped).find("would bypass it"), std::string::npos);
  // The config as run parses back to the same points.
  EXPECT_EQ(ids(parse_sweep_config(to_yaml(c), "as-run.yaml")), v);
}

TEST(RemoteSweepConfig, MistakesNameTheirKey) {
  const std::string model = "remote:\n  model: {model: lenet, batch: 4}\n";
  expect_error(local_config("remote:\n  steps: 3\n"), {"remote.model", "missing"});
  expect_error(local_config(model + "  clients: [1]\n"), {"remote.clients", "from 2"});
  expect_error(local_config(model + "  transports: [shm]\n"), {"remote.transports", "tcp, verbs"});
  expect_error(local_config(model + "  links: [{gbps: 1, latency: 5}]\n"), {"remote.links[0].latency", "unknown key"});
  expect_error(local_config(model + "  links: [{gbps: -1}]\n"), {"remote.links[0].gbps"});
  expect_error(local_config(model + "  links: [{gbps: 1}, {gbps: 1}]\n"), {"remote.links[1]", "twice"});
  expect_error(local_config(model + "  policy: fastest\n"), {"remote.policy", "fastest"});
  expect_error(local_config(model + "  models: [lenet]\n"), {"remote.model", "both given"});
  expect_error(local_config("remote:\n  models: [lenet, {model: lenet, batch: 8}]\n"), {"remote.models[1]", "twice"});
  // models: every setup of each, in the order listed.
  const auto two = ids(parse_sweep_config(local_config("remote:\n  models: [lenet, {model: mobilenet_v1, batch: 4}]\n"
                                                       "  clients: [2]\n"), "test.yaml"));
  EXPECT_EQ(two, (std::vector<std::string>{"remote/lenet/b8/local_device", "remote/lenet/b8/loopback",
                                           "remote/lenet/b8/partial/k2", "remote/mobilenet_v1/b4/local_device",
                                           "remote/mobilenet_v1/b4/loopback", "remote/mobilenet_v1/b4/partial/k2"}));
  expect_error("name: t\ncluster: {type: emulated, link: 1gbit}\n" + model + "  links: [{gbps: 10}]\n",
               {"remote.links[0].gbps", "above cluster.link"});
  expect_error("name: t\ncluster: {type: local, latency_us: 50}\ntrain:\n  models: [lenet]\n",
               {"cluster.latency_us", "remote device link only"});
  const SweepConfig c =
      parse_sweep_config("name: t\ncluster: {type: local, latency_us: 70}\n" + model +
                         "  links: [{gbps: 1}, {gbps: 1, latency_us: 5}]\n", "test.yaml");
  ASSERT_EQ(c.remote.links.size(), 2u);
  EXPECT_EQ(c.remote.links[0].latency_us, 70);
  EXPECT_EQ(c.remote.links[1].latency_us, 5);
}

// One repeat of a remote point of mobilenet_v1 b8 64px, `img_s` in total; the link points move
// 17 MB each way in 5 round trips per step.
json remote_record(const std::string& id, const std::string& setup, int clients, double gbps, double latency_us,
                   int repeat, double img_s, int seq) {
  json rec = {{"schema", 1}, {"run_id", "rg-20261129-100000"}, {"sweep", "rg"}, {"seq", seq}, {"points_total", 15},
              {"point", "remote/mobilenet_v1/b8/s64/" + id}, {"repeat", repeat}, {"kind", "remote"},
              {"nodes", setup == "link" ? 2 : 1}, {"transport", setup == "local_device" ? "none" : "tcp"},
              {"profile", "none"}, {"model", "mobilenet_v1"}, {"batch", 8}, {"image_size", 64}, {"setup", setup},
              {"clients", clients}, {"link_gbps", gbps}, {"latency_us", latency_us},
              {"cluster", {{"type", "emulated"}, {"link", "25gbit"}, {"cpus_per_node", 1}, {"note", ""}}},
              {"status", "ok"}, {"error", ""}, {"started_at", "2026-11-29T10:00:" + std::to_string(10 + seq) + "Z"}};
  rec["remote"] = {{"summary", {{"total_img_s", {{"mean", img_s}, {"ci95", 0.0}}}, {"step_s", 8 / img_s},
                               {"backward_s", 0.04}}},
                   {"clients", json::array()}, {"meta", {{"backend", "remote"}}}};
  if (setup == "local_device") {
    rec["remote"].update({{"per_step", nullptr}, {"device", nullptr}, {"link", nullptr}});
  } else {
    rec["remote"]["per_step"] = {{"sent_bytes", 17e6}, {"received_bytes", 17e6}, {"round_trips", 5}};
    rec["remote"]["device"] = {{"device", "the CPU (onednn) standing in for a GPU"}, {"backend", "onednn"},
                               {"threads", 1}, {"emulated", true}, {"policy", "best_effort"}};
  }
  return rec;
}

// Local device 100/110/90 img/s (median 100: a step of 0.08 s), backward 0.04 s; loopback's median
// 95 img/s (a step of 0.0842105 s). At 10 Gbit/s and 50 us the model adds 17 MB up (13.6 ms), the
// 13.6 ms down hidden behind backward, and 5 x 2 x 50 us: 14.1 ms, so 100 x 0.08 / 0.0941 =
// 85.02 img/s from the local device (75 measured: -12%), 8 / 0.0983105 = 81.37 from loopback
// (-8%). At 1 Gbit/s and 500 us: 136 + (136 - 40) + 5 ms = 237 ms: 25.24 img/s (-21%) and 24.91
// (-20%).
std::string remote_jsonl() {
  std::string s;
  int seq = 0;
  const double local[] = {100, 110, 90}, loop[] = {95, 100, 85}, k2[] = {96, 104, 88}, fast[] = {75, 80, 70},
               slow[] = {20, 22, 18};
  for (int rep = 1; rep <= 3; ++rep) {
    const size_t i = size_t(rep - 1);
    s += remote_record("local_device", "local_device", 0, 0, 0, rep, local[i], seq++).dump() + "\n";
    s += remote_record("loopback", "loopback", 1, 0, 0, rep, loop[i], seq++).dump() + "\n";
    s += remote_record("partial/k2", "partial", 2, 0, 0, rep, k2[i], seq++).dump() + "\n";
    s += remote_record("tcp/10gbit/50us", "link", 1, 10, 50, rep, fast[i], seq++).dump() + "\n";
    s += remote_record("tcp/1gbit/500us", "link", 1, 1, 500, rep, slow[i], seq++).dump() + "\n";
  }
  return s;
}

TEST(RemoteReport, TheSectionNormalisesToTheLocalDeviceAndGivesTheModel) {
  using namespace report_testing;
  TempDir dir;
  write_report(make_run(dir, remote_jsonl()), no_plots());
  const std::string md = section(read_file(dir.path() + "/report.md"), "## Remote GPU");
  EXPECT_TRUE(has_all(md, {
      "### mobilenet_v1 b8 64px",
      "the CPU (onednn) standing in for a GPU (onednn, 1 thread(s)), **EMULATED**",
      "| local device (no server) | - | - | 100.00 (90.00..110.00) | 100% (100..100%) | - |",
      "| local: client and server on the device's node | 1 | tcp, loopback | 95.00 (85.00..100.00) | 94% (91..95%) | "
      "100.00 (-5%) | - | 17.00 / 17.00 | 5 |",
      "| local partials: 2 clients, 1/2 each | 2 | tcp, loopback | 96.00 (88.00..104.00) | 96% (95..98%) | "
      "100.00 (-4%) | 95.00 (+1%) |",
      "| remote: client on another node | 1 | tcp, 10 Gbit/s, 50 us | 75.00 (70.00..80.00) | 75% (73..78%) | "
      "85.02 (-12%) | 81.37 (-8%) | 17.00 / 17.00 | 5 |",
      "| remote: client on another node | 1 | tcp, 1 Gbit/s, 500 us | 20.00 (18.00..22.00) | 20% (20..20%) | "
      "25.24 (-21%) | 24.91 (-20%) |",
      "Below 90% of local: tcp, 10 Gbit/s, 50 us; tcp, 1 Gbit/s, 500 us.",
      "Below 50% of local: tcp, 1 Gbit/s, 500 us.",
  })) << md;
  expect_same_bytes(remote_jsonl());
  if (!have_gnuplot()) return;  // the plot: kept share against the link rate, a line per latency
  TempDir with_plots;
  write_report(make_run(with_plots, remote_jsonl()));
  EXPECT_NE(read_file(with_plots.path() + "/report.md").find("(plots/remote-mobilenet_v1-b8-s64.svg)"), std::string::npos);
  EXPECT_TRUE(has_all(read_file(with_plots.path() + "/plots/remote-mobilenet_v1-b8-s64.dat"),
                      {"# measured, 50 us\n10 75 ", "# predicted (loopback + link), 500 us\n1 24.9"}));
}

TEST(RemoteModel, TheTransferTermsAreBytesOverRateAndRoundTripsTimesLatency) {
  const predict::RemoteTraffic t{17e6, 17e6, 5};
  const predict::RemoteStep serial{0.08, 0}, overlapped{0.08, 0.04};
  EXPECT_NEAR(predict::remote_transfer_s(serial, t, {10, 50}), 0.0272 + 0.0005, 1e-12);
  EXPECT_NEAR(predict::remote_transfer_s(serial, t, {0, 50}), 0.0005, 1e-12);  // no rate: latency alone
  // The gradients' 13.6 ms down hide behind a 40 ms backward; at 1 Gbit/s 96 of their 136 ms show.
  EXPECT_NEAR(predict::remote_transfer_s(overlapped, t, {10, 50}), 0.0136 + 0.0005, 1e-12);
  EXPECT_NEAR(predict::remote_kept(overlapped, t, {1, 500}), 0.08 / (0.08 + 0.136 + 0.096 + 0.005), 1e-12);
}

// The what-if's answers by hand: a step of 0.1 s (no backward to hide behind) may grow by
// 0.1 / 0.9 - 0.1 = 11.11 ms to keep 90%. 34 MB per step over tcp at half the link rate and
// 10 us of its own, at 5 us of link latency: 272 Mbit / (0.5 R) + 5 x 2 x 15 us = 11.11 ms, so
// R = 49.6 Gbit/s. At 100 Gbit/s the bytes take 5.44 ms: (11.11 - 5.44) / 10 - 10 us = 557 us.
TEST(RemoteWhatIf, AnswersWhichLinkKeepsTheShareAsWorkedByHand) {
  const predict::RemoteStep s{0.1, 0};
  const predict::RemoteTraffic t{17e6, 17e6, 5};
  EXPECT_NEAR(predict::rate_to_keep(s, t, 0.5, 15, 0.9), 49.63, 0.01);
  EXPECT_NEAR(predict::latency_to_keep(s, t, 0.5, 100, 10, 0.9), 557.11, 0.01);
  EXPECT_EQ(predict::rate_to_keep(s, t, 0.5, 1200, 0.9), 0);  // 5 x 2 x 1.2 ms: the latency alone is too much
  EXPECT_LT(predict::latency_to_keep(s, t, 0.5, 1, 10, 0.9), 0);  // 1 Gbit/s: the bytes alone are too much

  const std::string file = R"(
name: w
remote:
  servers:
    - name: GPU
      models:
        - model: mobilenet_v1
          batch: 8
          step_s: {value: 0.1, source: "assumed: a round number"}
          backward_share: {value: 0, source: "assumed: serial"}
          input_bytes: {value: 0, source: "assumed: none"}
  transports:
    - name: tcp
      efficiency: {value: 0.5, source: "assumed: half"}
      latency_us: {value: 10, source: "assumed: ten"}
)";
  ASSERT_TRUE(predict::is_remote_what_if(file));
  report_testing::TempDir dir;
  const report::Run run = report::load_run(report_testing::make_run(dir, remote_jsonl()), 0.1);
  const std::string md = predict::md_remote_what_if(predict::parse_remote_what_if(file, "w.yaml"), run);
  EXPECT_TRUE(ringbench::testing::has_all(md, {"## GPU, mobilenet_v1 b8 (step 100.0 ms; per step 17.0 MB up, 17.0 MB down, 5 round trips)",
                                               "| tcp | 49.6 Gbit/s |", "| 557 us |"}))
      << md;
  std::string no_source = file;
  no_source.replace(no_source.find("\"assumed: half\""), 15, "\"half\"");
  try {
    predict::parse_remote_what_if(no_source, "w.yaml");
    ADD_FAILURE() << "a number without its source was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("remote.transports[0].efficiency.source"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ringbench
