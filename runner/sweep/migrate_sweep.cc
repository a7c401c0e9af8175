#include "runner/sweep/migrate_sweep.h"

#include <algorithm>

#include "base/bytes.h"
#include "runner/backends/backend.h"
#include "runner/sweep/model_entry.h"
#include "runner/sweep/sweep_config.h"
#include "runner/sweep/vgpu_keys.h"
#include "runner/record/yaml_reader.h"
#include "vgpu/catalog.h"
#include "runner/record/point.h"

namespace ringbench {
namespace {

const std::vector<std::string> kMethods{"precopy", "stopcopy"};

// `model`: {model, batch, image_size} or a model's name.
void parse_model(const YamlReader& r, MigrateSweep& s) {
  const std::string where = r.key("model");
  if (!r.has("model"))
    r.fail(where, "missing; the model the job trains, e.g. {model: mobilenet_v1, batch: 8, image_size: 96}");
  read_train_model(r, r.at("model"), where, s.model, s.batch, s.image_size);
}

// nodes, rank and to_node: a ring of at least 2 ranks; the rank is not rank 0 (which writes the
// job's results) and moves off its own node.
void parse_placement(const YamlReader& r, MigrateSweep& s) {
  r.get_int("nodes", s.nodes, 2, kMaxNodes);
  if (s.nodes > kMaxLocalNodes)
    r.fail(r.key("nodes"), "must be <= " + std::to_string(kMaxLocalNodes) + " (got " + std::to_string(s.nodes) + ")");
  r.get_int("rank", s.rank, -1, kMaxNodes - 1);
  if (s.rank == 0 || s.rank >= s.nodes)
    r.fail(r.key("rank"), "must be 1.." + std::to_string(s.nodes - 1) + " or -1 for the last (got " +
                              std::to_string(s.rank) + "; rank 0 writes the job's results)");
  r.get_int("to_node", s.to_node, -1, kMaxNodes - 1);
  if (s.to_node >= kMaxLocalNodes)
    r.fail(r.key("to_node"),
           "must be < " + std::to_string(kMaxLocalNodes) + " (the nodes of a cluster on one machine)");
  if (s.target_node() == s.moving_rank())
    r.fail(r.key("to_node"), "is node " + std::to_string(s.target_node()) + ", where rank " +
                                 std::to_string(s.moving_rank()) + " already runs: name another node");
}

void parse_steps(const YamlReader& r, MigrateSweep& s) {
  r.get_int("warmup", s.warmup, 0, kMaxSteps);
  r.get_int("steps", s.steps, 2, kMaxSteps);
  r.get_int("at_step", s.at_step, 1, kMaxSteps);
  const int last = s.warmup + s.steps - 1;
  if (s.at_step <= s.warmup || s.at_step > last)
    r.fail(r.key("at_step"), std::to_string(s.at_step) + " must fall after the warmup and before the last step (" +
                                 std::to_string(s.warmup + 1) + ".." + std::to_string(last) +
                                 ", warmup included), so the img/s timeline shows the dip and the recovery");
}

void parse_framebuffers(const YamlReader& r, MigrateSweep& s) {
  if (!r.has("framebuffers")) return;
  s.framebuffers = r.list<std::string>("framebuffers", "byte counts (1G, 512M)");
  std::vector<size_t> seen;
  for (const auto& f : s.framebuffers) {
    size_t bytes = 0;
    try {
      bytes = parse_bytes(f);
    } catch (const std::exception&) {
      r.fail(r.key("framebuffers"), quote_excerpt(f) + " is not a byte count (e.g. 512M, 1G, 8G)");
    }
    if (bytes == 0)
      r.fail(r.key("framebuffers"), quote_excerpt(f) + " is empty: a framebuffer holds at least the rank's state");
    if (std::find(seen.begin(), seen.end(), bytes) != seen.end())
      r.fail(r.key("framebuffers"), quote_excerpt(f) + " is a size listed twice");
    seen.push_back(bytes);
  }
}

void parse_profiles_of(const YamlReader& r, MigrateSweep& s, const vgpu::Catalog& catalog) {
  if (!r.has("profiles")) return;
  s.profiles = parse_profiles(r, catalog);
  for (const auto& p : s.profiles) {
    const vgpu::Profile* vp = p == "none" ? nullptr : catalog.find(p);
    if (!vp || vp->framebuffer_mib <= 0)
      r.fail(r.key("profiles"), p + " has no framebuffer of its own to copy: list sized profiles (T4-4C, A100-1-5C), "
                                    "or sizes under framebuffers");
  }
}

void parse_methods(const YamlReader& r, MigrateSweep& s) {
  if (!r.has("methods")) return;
  s.methods = r.list<std::string>("methods", "method names");
  for (const auto& m : s.methods)
    if (std::find(kMethods.begin(), kMethods.end(), m) == kMethods.end())
      r.fail(r.key("methods"), quote_excerpt(m) + " is not one of: " + join_names(kMethods));
}

}  // namespace

MigrateSweep parse_migrate(const YamlReader& r, const vgpu::Catalog& catalog, const std::string& cluster_type) {
  MigrateSweep s;
  r.only({"model", "nodes", "to_node", "rank", "at_step", "warmup", "steps", "transport", "backend", "methods",
          "framebuffers", "profiles"});
  parse_model(r, s);
  parse_placement(r, s);
  // Under mpirun the target is a standby that node B's sweep rank starts with the job, and that
  // sweep rank runs nothing else meanwhile.
  if (cluster_type == "mpirun" && s.target_node() < s.nodes)
    r.fail(r.key("to_node"), "is node " + std::to_string(s.target_node()) + ", which runs a rank of the job; under "
                             "mpirun the rank moves to a host of its own: " + std::to_string(s.nodes) + " or above");
  parse_steps(r, s);
  r.get("transport", s.transport, "a transport name");
  const Backend* b = find_backend(s.transport);
  if (!b || !is_ring(*b))
    r.fail(r.key("transport"), quote_excerpt(s.transport) + " is not one of: " + backend_names(is_ring, ", ") +
                                   " (the migration re-forms our ring)");
  r.get_choice("backend", s.backend, {"auto", "onednn", "reference", "cudnn"});
  parse_methods(r, s);
  parse_framebuffers(r, s);
  parse_profiles_of(r, s, catalog);
  if (s.framebuffers.empty() && s.profiles.empty())
    r.fail(r.key("framebuffers"), "missing; list the framebuffer sizes to move (e.g. [1G, 2G, 4G, 8G]) and/or "
                                  "vGPU profiles under " + r.key("profiles"));
  return s;
}

nlohmann::json to_json(const MigrateSweep& s) {
  nlohmann::json j = {{"model", {{"model", s.model}, {"batch", s.batch}, {"image_size", s.image_size}}},
                      {"nodes", s.nodes}, {"to_node", s.target_node()}, {"rank", s.moving_rank()},
                      {"at_step", s.at_step}, {"warmup", s.warmup}, {"steps", s.steps},
                      {"transport", s.transport}, {"backend", s.backend}, {"methods", s.methods}};
  if (!s.framebuffers.empty()) j["framebuffers"] = s.framebuffers;
  if (!s.profiles.empty()) j["profiles"] = s.profiles;
  return j;
}

void for_each_migrate_point(const MigrateSweep& s, int repeat, const std::function<void(const SweepPoint&)>& visit) {
  const std::string base = "migrate/" + s.model + "/b" + std::to_string(s.batch) + size_suffix(s.image_size) + "/n" +
                           std::to_string(s.nodes) + "/" + s.transport + "/";
  const auto point = [&](const std::string& method, const std::string& profile) {
    SweepPoint p =
        model_point(PointKind::migrate, s.model, s.batch, s.image_size, s.nodes, s.transport, profile, repeat);
    p.method = method;
    return p;
  };
  for (const auto& fb : s.framebuffers)
    for (const auto& method : s.methods) {
      SweepPoint p = point(method, "none");
      p.framebuffer = fb;
      p.id = base + method + "/fb" + fb;
      visit(p);
    }
  for (const auto& profile : s.profiles)
    for (const auto& method : s.methods) {
      SweepPoint p = point(method, profile);
      p.id = base + method + "/" + profile;
      visit(p);
    }
}

std::vector<std::string> migrate_args(const MigrateSweep& s, const SweepPoint& p, uint64_t seed) {
  std::vector<std::string> a = {"train", "--model", p.model, "--batch", std::to_string(p.batch),
                                "--steps", std::to_string(s.steps), "--warmup", std::to_string(s.warmup),
                                "--transport", p.transport, "--backend", s.backend, "--seed", std::to_string(seed),
                                "--migrate-at", std::to_string(s.at_step), "--migrate-rank",
                                std::to_string(s.moving_rank()), "--migrate-method", p.method};
  if (p.image_size) a.insert(a.end(), {"--image-size", std::to_string(p.image_size)});
  if (!p.framebuffer.empty()) a.insert(a.end(), {"--framebuffer", p.framebuffer});
  if (p.profile != "none") a.insert(a.end(), {"--profile", p.profile});
  return a;
}

}  // namespace ringbench
