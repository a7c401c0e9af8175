// A sweep config's `migrate:` section: live migration of one training rank during a training
// point (`ringbench train --migrate-at`), as vMotion moves a vGPU VM. One model entry trains on
// `nodes` ranks; once `at_step` steps are done, rank `rank` moves to node `to_node` by each of
// `methods`, with each framebuffer of `framebuffers` and each vGPU profile of `profiles`. The
// report's "Live migration" section compares the methods' stun times (runner/report/md_migrate.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ringbench {

namespace vgpu {
class Catalog;
}
class YamlReader;
struct SweepPoint;

struct MigrateSweep {
  std::string model;
  int batch = 8;
  int image_size = 0;  // 0: the model's default
  int nodes = 3;       // ranks of the job, one per node (nodes 0..nodes-1)
  int to_node = -1;    // the node the rank moves to; -1: `nodes`, the first node without a rank
  int rank = -1;       // the rank that moves; -1: the last
  int at_step = 15;    // the migration starts once this many steps (warmup included) are done
  int warmup = 5, steps = 120;
  std::string transport = "tcp";  // a ring transport: the ring re-forms around the moved rank
  std::string backend = "auto";
  std::vector<std::string> methods{"precopy", "stopcopy"};
  std::vector<std::string> framebuffers;  // byte counts as written ("1G"), each a point per method
  std::vector<std::string> profiles;      // vGPU profiles (the catalog's names): their framebuffer

  int moving_rank() const { return rank < 0 ? nodes - 1 : rank; }
  int target_node() const { return to_node < 0 ? nodes : to_node; }
};

// Parses and validates the section (`r` reads "migrate"; profiles are the catalog's); every
// error names its key. `cluster_type`: on a local or emulated cluster the moving rank starts its
// target (in node B's namespace); under mpirun, node B's sweep rank starts a standby target with
// the job (train --migrate-to standby), so node B must be a host without a rank.
MigrateSweep parse_migrate(const YamlReader& r, const vgpu::Catalog& catalog, const std::string& cluster_type);
nlohmann::json to_json(const MigrateSweep& s);

// The section's points of one repeat, in the order run: per framebuffer (then per profile) each
// method, so that a pass covers both methods at every size before the next.
void for_each_migrate_point(const MigrateSweep& s, int repeat, const std::function<void(const SweepPoint&)>& visit);

// The `ringbench train` arguments of a migrate point (without --json, --threads, --iface and
// --migrate-netns and --migrate-cpus (node B's), which the executor adds where the cluster has namespaces).
std::vector<std::string> migrate_args(const MigrateSweep& s, const SweepPoint& p, uint64_t seed);

}  // namespace ringbench
