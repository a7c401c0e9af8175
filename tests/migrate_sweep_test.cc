// End to end: a sweep of a tiny migrate config (LeNet on 3 local ranks, 30 steps, rank 2 moved by
// pre-copy and by stop-and-copy with 32 and 64 MiB framebuffers) with the real binary: its
// raw.jsonl records with the migration, the report's Live migration section, and the report
// regenerated from raw.jsonl alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/run_command.h"

namespace ringbench {
namespace {

using json = nlohmann::json;
using testing::has_all;
using testing::read_text;
using testing::run_command;
using testing::temp_path;
namespace fs = std::filesystem;
const std::string kBin = RINGBENCH_BIN;

TEST(MigrateSweep, TinyLenetConfigEndToEnd) {
  const std::string dir = temp_path("migrate-run"), cfg = temp_path("migrate") + ".yaml";
  std::ofstream(cfg) << "name: tiny-migrate\nrepeats: 1\ntimeout: 120\ncluster: {type: local}\n"
                        "migrate:\n  model: {model: lenet, batch: 8}\n  nodes: 3\n  at_step: 6\n  warmup: 2\n"
                        "  steps: 30\n  methods: [precopy, stopcopy]\n  framebuffers: [32M, 64M]\n";
  const auto r = run_command(kBin + " sweep " + cfg + " --out " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_all(r.output, {"[1/4] migrate/lenet/b8/n3/tcp/precopy/fb32M r1: ok ", "precopy of 32 MiB: stun ",
                                 "[4/4] migrate/lenet/b8/n3/tcp/stopcopy/fb64M r1: ok ",
                                 "stopcopy of 64 MiB: stun "}));

  std::ifstream f(dir + "/raw.jsonl");
  int records = 0;
  for (std::string line; std::getline(f, line); ++records) {
    const json rec = json::parse(line);
    EXPECT_EQ(rec["kind"], "migrate");
    EXPECT_EQ(rec["status"], "ok") << rec.dump();
    EXPECT_EQ(rec["migrate_at"], 6);
    const json& m = rec["migrate"]["migration"];
    EXPECT_EQ(m["moved"], true) << m.dump();
    EXPECT_EQ(m["rank"], 2);
    EXPECT_EQ(m["method"], rec["method"]);
    EXPECT_EQ(m["framebuffer_bytes"].get<double>(), rec["framebuffer"] == "32M" ? 32 << 20 : 64 << 20);
    EXPECT_GT(m["stun_s"].get<double>(), 0);
    EXPECT_EQ(rec["migrate"]["ranks"][0]["step_s"].size(), 30u);
    const auto& cmd = rec["command"];
    EXPECT_NE(std::find(cmd.begin(), cmd.end(), "--migrate-at"), cmd.end()) << cmd.dump();
    EXPECT_NE(std::find(cmd.begin(), cmd.end(), "--threads"), cmd.end()) << cmd.dump();
  }
  EXPECT_EQ(records, 4);

  const std::string report = read_text(dir + "/report.md");
  EXPECT_TRUE(has_all(report, {"## Live migration", "### lenet b8 on 3 nodes (tcp)", "| pre-copy | 32 MiB | 1/1 |",
                               "| stop-and-copy | 64 MiB | 1/1 |", "**Model**", "| pre-copy | 24 GiB |",
                               "(predicted)"}));
  EXPECT_TRUE(testing::report_regenerates(kBin, dir));
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace ringbench
