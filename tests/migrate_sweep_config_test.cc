// Sweep configs' migrate section: defaults, every mistake an error naming its key, the points it
// expands to (per framebuffer, then per profile, each method; repeats outermost), the cluster's
// node count (the node the rank moves to included), the `ringbench train --migrate-*` command
// line of each point, and the config as run parsing back the same.
#include <gtest/gtest.h>

#include <string>

#include "runner/sweep/point_args.h"
#include "runner/sweep/sweep_config.h"
#include "tests/sweep_config_errors.h"

namespace ringbench {
namespace {

using testing::expect_error;
using testing::local_config;

const std::string kMigrate = R"(
name: t
repeats: 1
cluster: {type: emulated, link: 10gbit}
migrate:
  model: {model: mobilenet_v1, batch: 8, image_size: 96}
)";

// kMigrate with `extra` lines appended under migrate: (framebuffers [1G] unless they list some).
std::string with(const std::string& extra) {
  const bool sizes = extra.find("framebuffers") != std::string::npos || extra.find("profiles") != std::string::npos;
  return kMigrate + extra + (sizes ? "" : "  framebuffers: [1G]\n");
}

std::string joined(const std::vector<std::string>& a) {
  std::string line;
  for (const auto& x : a) line += x + " ";
  return line;
}

TEST(MigrateSweepConfig, DefaultsMoveTheLastRankToTheFirstFreeNode) {
  const SweepConfig c = parse_sweep_config(with(""), "test.yaml");
  ASSERT_TRUE(c.has_migrate);
  EXPECT_FALSE(c.has_train);
  const MigrateSweep& m = c.migrate;
  EXPECT_EQ(m.model, "mobilenet_v1");
  EXPECT_EQ(m.batch, 8);
  EXPECT_EQ(m.image_size, 96);
  EXPECT_EQ(m.nodes, 3);
  EXPECT_EQ(m.moving_rank(), 2);
  EXPECT_EQ(m.target_node(), 3);
  EXPECT_EQ(m.at_step, 15);
  EXPECT_EQ(m.warmup, 5);
  EXPECT_EQ(m.steps, 120);
  EXPECT_EQ(m.transport, "tcp");
  EXPECT_EQ(m.methods, (std::vector<std::string>{"precopy", "stopcopy"}));
  // The cluster has the job's 3 nodes and node 3 to move to (the top level's nodes: [1, 2, 4]).
  EXPECT_EQ(cluster_nodes(c), 4);
  EXPECT_EQ(cluster_nodes(parse_sweep_config(with("  nodes: 4\n  to_node: 6\n"), "test.yaml")), 7);
  EXPECT_EQ(cluster_nodes(parse_sweep_config(with("  nodes: 5\n  rank: 1\n  to_node: 0\n"), "test.yaml")), 5);
}

TEST(MigrateSweepConfig, MistakesNameTheirKey) {
  expect_error(with("  when: 3\n"), {"migrate.when", "unknown key", "at_step"});
  expect_error(kMigrate, {"migrate.framebuffers", "missing", "migrate.profiles"});
  expect_error(with("  framebuffers: [1G, lots]\n"), {"migrate.framebuffers", "'lots' is not a byte count"});
  expect_error(with("  framebuffers: [1G, 1024M]\n"), {"migrate.framebuffers", "'1024M' is a size listed twice"});
  expect_error(with("  framebuffers: [0]\n"), {"migrate.framebuffers", "'0' is empty"});
  expect_error(with("  profiles: [T4-4C, Z9-1Q]\n"), {"migrate.profiles", "Z9-1Q"});
  expect_error(with("  profiles: [passthrough]\n"), {"migrate.profiles", "passthrough has no framebuffer of its own"});
  expect_error(with("  profiles: [none]\n"), {"migrate.profiles", "none has no framebuffer"});
  expect_error(with("  methods: [precopy, postcopy]\n"), {"migrate.methods", "'postcopy'", "precopy, stopcopy"});
  expect_error(with("  methods: [precopy, precopy]\n"), {"migrate.methods", "listed twice"});
  expect_error(with("  nodes: 1\n"), {"migrate.nodes", "must be from 2 to 4096 (got 1)"});
  expect_error(with("  rank: 0\n"), {"migrate.rank", "1..2 or -1", "rank 0 writes the job's results"});
  expect_error(with("  rank: 3\n"), {"migrate.rank", "1..2"});
  expect_error(with("  rank: 1\n  to_node: 1\n"), {"migrate.to_node", "node 1, where rank 1 already runs"});
  expect_error(with("  nodes: 4\n  to_node: 3\n"), {"migrate.to_node", "node 3, where rank 3 already runs"});
  expect_error(with("  to_node: 300\n"), {"migrate.to_node", "< 253"});
  expect_error(with("  at_step: 5\n"), {"migrate.at_step", "5 must fall after the warmup", "6..124"});
  expect_error(with("  warmup: 2\n  steps: 10\n  at_step: 12\n"), {"migrate.at_step", "3..11"});
  expect_error(with("  transport: mpi\n"), {"migrate.transport", "'mpi'", "re-forms our ring"});
  expect_error(with("  backend: tpu\n"), {"migrate.backend", "'tpu'"});
  expect_error(local_config("migrate:\n  model: {model: resnet50}\n  framebuffers: [1G]\n"),
               {"migrate.model.model", "'resnet50'", "mobilenet_v1"});
  expect_error(local_config("migrate:\n  framebuffers: [1G]\n"), {"migrate.model", "missing"});
  expect_error(local_config("migrate:\n  model: {model: lenet, batch: 0}\n  framebuffers: [1G]\n"),
               {"migrate.model.batch", "must be from 1 to"});
  // Under mpirun node B's sweep rank runs the standby, so B is a host without a rank of the job.
  expect_error("name: t\ncluster: {type: mpirun}\nmigrate:\n  model: lenet\n  to_node: 1\n  framebuffers: [1G]\n",
               {"migrate.to_node", "is node 1, which runs a rank of the job", "3 or above"});
  EXPECT_EQ(parse_sweep_config("name: t\ncluster: {type: mpirun}\nmigrate:\n  model: lenet\n  framebuffers: [1G]\n", "test.yaml")
                .migrate.target_node(),
            3);
  expect_error(local_config("migrate: [lenet]\n"), {"migrate", "mapping"});
}

TEST(MigrateSweepConfig, PointsPerFramebufferThenProfileEachMethodRepeatsOutermost) {
  const SweepConfig c = parse_sweep_config(
      "name: t\nrepeats: 2\ncluster: {type: local}\n"
      "migrate:\n  model: {model: lenet, batch: 4}\n  framebuffers: [64M, 1G]\n  profiles: [t4-4c]\n",
      "test.yaml");
  EXPECT_EQ(c.migrate.profiles, (std::vector<std::string>{"T4-4C"}));  // the catalog's spelling
  std::vector<std::string> ids;
  for (const auto& p : expand_points(c)) {
    ids.push_back(p.id + " r" + std::to_string(p.repeat));
    EXPECT_EQ(p.kind, PointKind::migrate);
    EXPECT_EQ(p.nodes, 3);
    EXPECT_EQ(p.transport, "tcp");
  }
  const std::string b = "migrate/lenet/b4/n3/tcp/";
  std::vector<std::string> one;
  for (const char* tail : {"precopy/fb64M", "stopcopy/fb64M", "precopy/fb1G", "stopcopy/fb1G", "precopy/T4-4C",
                           "stopcopy/T4-4C"})
    one.push_back(b + tail);
  std::vector<std::string> want;
  for (const char* r : {" r1", " r2"})
    for (const auto& id : one) want.push_back(id + r);
  EXPECT_EQ(ids, want);
  // raw.jsonl keeps the method and the framebuffer as configured; a profile's point has none.
  const auto points = expand_points(c);
  for (const SweepPoint& p : {points[1], points[4]}) {
    nlohmann::json rec;
    p.write(rec);
    const PointCoords back = PointCoords::read(rec, "test");
    EXPECT_EQ(back.kind, PointKind::migrate);
    EXPECT_EQ(back.method, p.method);
    EXPECT_EQ(back.framebuffer, p.framebuffer);
    EXPECT_EQ(back.profile, p.profile);
  }
  EXPECT_EQ(points[1].framebuffer, "64M");
  EXPECT_EQ(points[4].framebuffer, "");
  EXPECT_EQ(points[4].profile, "T4-4C");
}

TEST(MigrateSweepConfig, PointArgsAreTrainsMigrateOptions) {
  const SweepConfig c = parse_sweep_config(
      with("  nodes: 4\n  rank: 1\n  to_node: 5\n  at_step: 9\n  warmup: 3\n  steps: 30\n  framebuffers: [2G]\n"
           "  profiles: [T4-8C]\n  methods: [stopcopy]\n"),
      "test.yaml");
  const auto points = expand_points(c);
  ASSERT_EQ(points.size(), 2u);
  const std::string fb = joined(point_args(c, points[0], "/tmp/p.json", "/tmp/log"));
  for (const std::string part : {"train --model mobilenet_v1 --batch 8 --steps 30 --warmup 3 --transport tcp ",
                                 "--seed 42 --migrate-at 9 --migrate-rank 1 --migrate-method stopcopy ",
                                 "--image-size 96 --framebuffer 2G ", "--json /tmp/p.json "})
    EXPECT_NE(fb.find(part), std::string::npos) << part << " not in: " << fb;
  EXPECT_EQ(fb.find("--profile"), std::string::npos) << fb;
  const std::string profile = joined(point_args(c, points[1], "/tmp/p.json", "/tmp/log"));
  EXPECT_NE(profile.find("--migrate-method stopcopy --image-size 96 --profile T4-8C "), std::string::npos) << profile;
  EXPECT_EQ(profile.find("--framebuffer"), std::string::npos) << profile;
  EXPECT_EQ(cluster_nodes(c), 6);
}

TEST(MigrateSweepConfig, ConfigAsRunParsesBackTheSame) {
  const SweepConfig c = parse_sweep_config(with("  framebuffers: [1G, 2G]\n  profiles: [A100-1-5C]\n"), "test.yaml");
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find("to_node: 3"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("rank: 2"), std::string::npos) << yaml;
  const SweepConfig back = parse_sweep_config(yaml, "config.yaml");
  EXPECT_EQ(to_yaml(back), yaml);
  EXPECT_EQ(back.migrate.framebuffers, (std::vector<std::string>{"1G", "2G"}));
  EXPECT_EQ(config_hash(back), config_hash(c));
  EXPECT_EQ(expand_points(back).size(), 6u);
}

}  // namespace
}  // namespace ringbench
