#include "runner/sweep/sweep_config.h"

#include "runner/backends/hierarchical.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "collectives/auth.h"
#include "base/errors.h"
#include "models/zoo.h"
#include "runner/backends/backend.h"
#include "runner/sweep/model_entry.h"
#include "runner/record/yaml_reader.h"
#include "base/bytes.h"
#include "vgpu/catalog.h"
#include "vgpu/scheduler.h"

namespace ringbench {
namespace {

const std::vector<std::string> kClusterTypes{"local", "emulated", "mpirun"};

// tc's rate syntax as far as configs need it: digits, an optional fraction, [k|m|g]bit.
bool is_tc_rate(const std::string& s) {
  size_t i = 0, digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    size_t frac = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++frac;
    if (frac == 0) return false;
  }
  if (digits == 0) return false;
  std::string unit = s.substr(i);
  return unit == "bit" || unit == "kbit" || unit == "mbit" || unit == "gbit";
}

void check_bytes(const YamlReader& r, const std::string& k, const std::string& v) {
  try {
    parse_bytes(v);
  } catch (const std::exception& e) {
    r.fail(r.key(k), quote_excerpt(v) + " is not a byte count (e.g. 4K, 64M, 1G)");
  }
}

// tuned: true chooses the tuned axes per point: they must stay at train's defaults, and the
// model it tunes with prices overlapped steps.
void check_tuned(const YamlReader& r, const TrainSweep& t) {
  if (!t.axes.settings.empty()) r.fail(r.key("settings"), "tuned: true chooses each point's settings: no settings list");
  for (const Axis& a : sweep_axes())
    if (a.tuned && t.axes.of(a.key) != std::vector<std::string>{a.default_value})
      r.fail(r.key(a.key), "tuned: true chooses " + a.key + " per point: leave it out");
  if (!t.overlap) r.fail(r.key("tuned"), "tuned: true with overlap: false: the tuning model prices overlapped steps");
}

TrainSweep parse_train(const YamlReader& r) {
  TrainSweep t;
  std::vector<std::string> keys{"models", "warmup", "steps", "overlap", "backend", "data_dir", "tuned", "tune_top_k",
                                "tune_repeats", "tune_steps"};
  for (const auto& k : axis_keys_and_settings(PointKind::train)) keys.push_back(k);
  r.only(keys);
  if (!r.has("models")) r.fail(r.key("models"), "missing; list the models to train, e.g. [{model: lenet, batch: 32}]");
  const YAML::Node models = r.at("models");
  if (!models.IsSequence() || models.size() == 0)
    r.fail(r.key("models"), "must be a non-empty list of {model, batch, image_size}");
  for (size_t i = 0; i < models.size(); ++i) {
    const std::string where = r.key("models") + "[" + std::to_string(i) + "]";
    SweepModel m;
    read_train_model(r, models[i], where, m.model, m.batch, m.image_size);
    for (const auto& o : t.models)
      if (o.model == m.model && o.batch == m.batch && o.image_size == m.image_size)
        r.fail(where, m.model + " with batch " + std::to_string(m.batch) + " and image_size " +
                          std::to_string(m.image_size) + " is listed twice");
    t.models.push_back(m);
  }
  r.get_int("warmup", t.warmup, 0, kMaxSteps);
  r.get_int("steps", t.steps, 1, kMaxSteps);
  r.get("overlap", t.overlap, "true or false");
  r.get_choice("backend", t.backend, {"auto", "onednn", "reference", "cudnn"});
  r.get("data_dir", t.data_dir, "a directory: the JPEG image set or the Fashion-MNIST files");
  if (r.has("data_dir") && t.data_dir.empty()) r.fail(r.key("data_dir"), "must not be empty");
  t.axes = read_axis_lists(r, PointKind::train);
  r.get("tuned", t.tuned, "true or false");
  for (const char* k : {"tune_top_k", "tune_repeats", "tune_steps"})
    if (r.has(k) && !t.tuned) r.fail(r.key(k), "only with tuned: true");
  r.get_int("tune_top_k", t.tune_top_k, 1, 64);
  r.get_int("tune_repeats", t.tune_repeats, 1, 100);
  r.get_int("tune_steps", t.tune_steps, 1, 1000);
  if (t.tuned) check_tuned(r, t);
  if (t.data_dir.empty() && uses_value(t.axes, axis_index("data"), "jpeg"))
    r.fail(r.key("data"), "jpeg needs train.data_dir: the image set (`ringbench data make imagenet-like DIR`) or a "
                          "folder with one subfolder of JPEGs per class");
  return t;
}

CollectivesSweep parse_collectives(const YamlReader& r) {
  CollectivesSweep c;
  std::vector<std::string> keys{"min_bytes", "max_bytes", "step_factor", "iters", "warmup_iters", "dtype", "check"};
  for (const auto& k : axis_keys_and_settings(PointKind::collectives)) keys.push_back(k);
  r.only(keys);
  r.get("min_bytes", c.min_bytes, "a byte count (4K, 64M)");
  r.get("max_bytes", c.max_bytes, "a byte count (4K, 64M)");
  check_bytes(r, "min_bytes", c.min_bytes);
  check_bytes(r, "max_bytes", c.max_bytes);
  if (parse_bytes(c.max_bytes) < parse_bytes(c.min_bytes))
    r.fail(r.key("max_bytes"), "must be >= min_bytes");
  r.get_double("step_factor", c.step_factor, 1, 1024);
  if (c.step_factor <= 1 && c.min_bytes != c.max_bytes)
    r.fail(r.key("step_factor"), "must be > 1 to go from min_bytes to max_bytes");
  r.get_int("iters", c.iters, 1, 10000000);
  r.get_int("warmup_iters", c.warmup_iters, 0, 10000000);
  r.get_choice("dtype", c.dtype, {"float", "half", "bfloat16"});
  r.get("check", c.check, "true or false");
  c.axes = read_axis_lists(r, PointKind::collectives);
  return c;
}

ClusterConfig parse_cluster(const YamlReader& r) {
  ClusterConfig c;
  r.only({"type", "link", "cpus_per_node", "hosts", "latency_us", "ranks_per_node"});
  if (!r.has("type")) r.fail(r.key("type"), "missing; one of: " + join_names(kClusterTypes));
  r.get_choice("type", c.type, kClusterTypes);
  if (r.has("link")) {
    if (c.type != "emulated") r.fail(r.key("link"), "only an emulated cluster has a configurable link rate");
    r.get("link", c.link, "a rate");
    if (!is_tc_rate(c.link))
      r.fail(r.key("link"), quote_excerpt(c.link) + " is not a tc rate: use e.g. 100mbit, 1gbit, 10gbit, 25gbit");
  }
  r.get_int("cpus_per_node", c.cpus_per_node, 0, 4096);
  r.get_double("latency_us", c.latency_us, 0, kMaxLatencyUs);
  r.get_int("ranks_per_node", c.ranks_per_node, 1, kMaxRanksPerNode);
  if (r.has("hosts")) {
    if (c.type != "mpirun") r.fail(r.key("hosts"), "only a cluster of type mpirun has hosts");
    c.hosts = r.list<std::string>("hosts", "host names");
  }
  return c;
}

SweepConfig parse_root(const YAML::Node& root, const std::string& origin) {
  YamlReader r(root, "", origin);
  r.only({"name", "nodes", "transports", "profiles", "allow_profile_mismatch", "vgpu_catalog", "sharing",
          "repeats", "seed", "timeout", "cluster", "train", "collectives", "infer", "migrate", "remote"});
  SweepConfig c;
  if (!r.has("name")) r.fail("name", "missing; name the sweep (it starts the run id)");
  r.get("name", c.name, "a string");
  if (!is_safe_name(c.name))
    r.fail("name", quote_excerpt(c.name) + " must be letters, digits, '.', '_' or '-', at most " +
                       std::to_string(kMaxNameChars) + " (it names a directory)");
  if (r.has("nodes")) c.nodes = r.list<int>("nodes", "node counts");
  std::set<int> seen_nodes;
  for (int n : c.nodes) {
    r.check_range("nodes", n, 1, kMaxNodes);
    if (!seen_nodes.insert(n).second) r.fail("nodes", std::to_string(n) + " is listed twice");
  }
  if (r.has("transports")) c.transports = r.list<std::string>("transports", "transport names");
  for (const auto& t : c.transports)
    if (!find_backend(t)) r.fail("transports", quote_excerpt(t) + " is not one of: " + backend_names(any_backend, ", "));
  r.get("allow_profile_mismatch", c.allow_profile_mismatch, "true or false");
  r.get("vgpu_catalog", c.vgpu_catalog, "a file name");
  std::unique_ptr<vgpu::Catalog> own;
  if (!c.vgpu_catalog.empty()) {
    try {
      own = std::make_unique<vgpu::Catalog>(vgpu::Catalog::load(c.vgpu_catalog));
    } catch (const std::exception& e) {
      r.fail("vgpu_catalog", e.what());
    }
  }
  const vgpu::Catalog& catalog = own ? *own : vgpu::Catalog::builtin();
  if (r.has("profiles")) c.profiles = parse_profiles(r, catalog);
  r.get_int("repeats", c.repeats, 1, int(kMaxPoints));
  r.get("seed", c.seed, "a non-negative integer");
  r.get_double("timeout", c.timeout_s, 1, kMaxTimeoutS);
  if (!r.has("cluster")) r.fail("cluster", "missing; e.g. {type: emulated, link: 10gbit} or {type: local}");
  c.cluster = parse_cluster(YamlReader(r.at("cluster"), "cluster", origin));
  if (r.has("train")) {
    c.has_train = true;
    c.train = parse_train(YamlReader(r.at("train"), "train", origin));
  }
  if (r.has("collectives")) {
    c.has_collectives = true;
    c.collectives = parse_collectives(YamlReader(r.at("collectives"), "collectives", origin));
  }
  if (r.has("infer")) {
    c.has_infer = true;
    c.infer = parse_infer(YamlReader(r.at("infer"), "infer", origin), catalog);
  }
  if (r.has("migrate")) {
    c.has_migrate = true;
    c.migrate = parse_migrate(YamlReader(r.at("migrate"), "migrate", origin), catalog, c.cluster.type);
  }
  if (r.has("remote")) {
    c.has_remote = true;
    const double cluster_gbps = c.cluster.type == "emulated" ? tc_rate_gbps(c.cluster.link) : 0;
    c.remote = parse_remote(YamlReader(r.at("remote"), "remote", origin), c.cluster.latency_us, cluster_gbps);
  }
  if (c.cluster.latency_us > 0 && !c.has_remote)
    r.fail("cluster.latency_us", "shapes the remote device link only (remote: links without their own latency); "
                                 "the ranks' links get no added latency (this kernel has no netem)");
  if (r.has("sharing")) {
    c.has_sharing = true;
    c.sharing = parse_sharing(YamlReader(r.at("sharing"), "sharing", origin));
    if (!c.has_train) r.fail("sharing", "needs a train section: its models are what the VMs train");
    if (!has_time_sliced(c.profiles, catalog))
      r.fail("sharing", "needs a time-sliced vGPU profile under profiles (e.g. T4-4C; see `ringbench vgpu profiles`)");
  }
  if (c.cluster.ranks_per_node > 1 && (c.has_infer || c.has_migrate || c.has_remote || c.has_sharing))
    r.fail("cluster.ranks_per_node", "several ranks per node apply to train and collectives points only; run the "
           "infer, migrate, remote and sharing sections in a sweep of their own");
  if (!c.has_train && !c.has_collectives && !c.has_infer && !c.has_migrate && !c.has_remote)
    r.fail("train", "the sweep measures nothing: add a train, collectives, infer, migrate or remote section");
  const int most_nodes = *std::max_element(c.nodes.begin(), c.nodes.end());
  if (c.has_collectives && most_nodes < 2)
    r.fail("nodes", "a collectives sweep needs a node count >= 2");
  if (c.cluster.type != "mpirun" && most_nodes > kMaxLocalNodes)
    r.fail("nodes", std::to_string(most_nodes) + " nodes: a " + c.cluster.type + " cluster on this machine has 1 to " +
                        std::to_string(kMaxLocalNodes));
  // Bounded before anything is expanded, so a typo cannot make the sweep (or --dry-run) fill memory.
  SweepConfig one = c;
  one.repeats = 1;
  size_t per_repeat = 0;
  for_each_point(one, [&](const SweepPoint&) { ++per_repeat; });
  if (per_repeat * size_t(c.repeats) > kMaxPoints)
    r.fail("repeats", std::to_string(c.repeats) + " repeats of " + std::to_string(per_repeat) + " points make more than " +
                          std::to_string(kMaxPoints) + " points; a sweep is bounded to that many");
  return c;
}

}  // namespace

SweepConfig parse_sweep_config(const std::string& text, const std::string& origin) {
  return parse_yaml(text, origin, parse_root);
}

SweepConfig load_sweep_config(const std::string& path) {
  return parse_sweep_config(read_config_file(path, "the sweep config"), path);
}

nlohmann::json to_json(const SweepConfig& c) {
  nlohmann::json j = {{"name", c.name}, {"nodes", c.nodes}, {"transports", c.transports},
                      {"profiles", c.profiles}, {"repeats", c.repeats}, {"seed", c.seed},
                      {"timeout", c.timeout_s}};
  if (c.allow_profile_mismatch) j["allow_profile_mismatch"] = true;
  if (!c.vgpu_catalog.empty()) j["vgpu_catalog"] = c.vgpu_catalog;
  if (c.has_sharing) j["sharing"] = to_json(c.sharing);
  j["cluster"] = {{"type", c.cluster.type}, {"cpus_per_node", c.cluster.cpus_per_node}};
  if (c.cluster.type == "emulated") j["cluster"]["link"] = c.cluster.link;
  if (!c.cluster.hosts.empty()) j["cluster"]["hosts"] = c.cluster.hosts;
  if (c.cluster.latency_us > 0) j["cluster"]["latency_us"] = c.cluster.latency_us;
  if (c.cluster.ranks_per_node > 1) j["cluster"]["ranks_per_node"] = c.cluster.ranks_per_node;
  if (c.has_train) {
    nlohmann::json models = nlohmann::json::array();
    for (const auto& m : c.train.models)
      models.push_back({{"model", m.model}, {"batch", m.batch}, {"image_size", m.image_size}});
    j["train"] = {{"models", models}, {"warmup", c.train.warmup}, {"steps", c.train.steps},
                  {"overlap", c.train.overlap}, {"backend", c.train.backend}};
    if (c.train.tuned)
      j["train"].update({{"tuned", true}, {"tune_top_k", c.train.tune_top_k}, {"tune_repeats", c.train.tune_repeats},
                         {"tune_steps", c.train.tune_steps}});
    if (!c.train.data_dir.empty()) j["train"]["data_dir"] = c.train.data_dir;
    write_axis_lists(c.train.axes, PointKind::train, j["train"]);
  }
  if (c.has_collectives) {
    const auto& k = c.collectives;
    j["collectives"] = {{"min_bytes", k.min_bytes}, {"max_bytes", k.max_bytes},
                        {"step_factor", k.step_factor}, {"iters", k.iters},
                        {"warmup_iters", k.warmup_iters}, {"dtype", k.dtype}, {"check", k.check}};
    write_axis_lists(k.axes, PointKind::collectives, j["collectives"]);
  }
  if (c.has_infer) j["infer"] = to_json(c.infer);
  if (c.has_migrate) j["migrate"] = to_json(c.migrate);
  if (c.has_remote) j["remote"] = to_json(c.remote);
  return j;
}

std::string to_yaml(const SweepConfig& c) {
  // JSON is YAML: emit it through yaml-cpp in block style so config.yaml reads like the input.
  YAML::Node n = YAML::Load(to_json(c).dump());
  YAML::Emitter out;
  out << n;
  return std::string("# The sweep as run, every default filled in (ringbench sweep --resume reads it)\n") +
         out.c_str() + "\n";
}

// A point with a model's coordinates (train, infer and share points).
SweepPoint model_point(PointKind kind, const std::string& model, int batch, int image_size, int nodes,
                       const std::string& transport, const std::string& profile, int repeat) {
  SweepPoint p;
  p.kind = kind;
  p.model = model;
  p.batch = batch;
  p.image_size = image_size;
  p.nodes = nodes;
  p.transport = transport;
  p.profile = profile;
  p.repeat = repeat;
  return p;
}

// "/s96" in a point's id when an image size is set.
std::string size_suffix(int image_size) { return image_size ? "/s" + std::to_string(image_size) : ""; }

SweepPoint shared_point(SweepPoint p, const std::string& id_base, const vgpu::Profile& vp, const std::string& policy,
                        int vms) {
  p.policy = policy;
  p.vms = vms;
  p.id = id_base + "/" + vp.name + "/" + policy + "/vms" + std::to_string(vms);
  if (vms > vp.max_instances) p.skip = vp.name + " hosts at most " + std::to_string(vp.max_instances) + " vGPU(s) per GPU";
  return p;
}

// Why collectives point p cannot run as configured ("" when it can): its backend lacks the
// collective, or the collective has no hierarchical algorithm, or the backend cannot carry one, or
// the `algo` axis names one the backend, the op or the rank count cannot run.
std::string collectives_unfit(const SweepConfig& c, const SweepPoint& p) {
  const Backend* b = find_backend(p.transport);
  if (!b) return "";  // an unknown transport is the config's error, already reported
  const Collective& op = find_collective(p.axis("collective"));
  if (std::string why = backend_lacks(*b, op); !why.empty()) return why;
  if (const std::string algo = p.axis("algo"); algo != "auto") {
    if (!b->ring) return b->name + " chooses its own algorithm (algo " + algo + " is our allreduce's)";
    if (op.name != "allreduce") return "algo " + algo + ": " + op.name + " has one algorithm per backend; algo is allreduce's";
    const int n = point_ranks(c, p);
    if (algo == "rd" && p.axis("hierarchical") != "true" && (n & (n - 1)))
      return "rd needs a power-of-two number of ranks, not " + std::to_string(n);
  }
  if (p.axis("hierarchical") != "true") return "";
  if (op.name != "allreduce") return "--hierarchical: " + op.name + " has no hierarchical algorithm; only allreduce has";
  return hierarchical_unfit(point_ranks(c, p), c.cluster.ranks_per_node, *b);
}

// Why train point p cannot run as configured ("" when it can): hierarchical on a backend or a
// cluster that cannot carry it, or with --autotune (whose cost model is the flat ring's).
std::string train_unfit(const SweepConfig& c, const SweepPoint& p) {
  if (p.axis("hierarchical") != "true") return "";
  const Backend* b = find_backend(p.transport);
  if (!b) return "";  // an unknown transport is the config's error, already reported
  if (c.train.tuned && b->ring) return "--hierarchical with tuned: true: --autotune prices the flat ring only";
  return hierarchical_unfit(point_ranks(c, p), c.cluster.ranks_per_node, *b);
}

void for_each_point(const SweepConfig& c, const std::function<void(const SweepPoint&)>& visit) {
  std::unique_ptr<vgpu::Catalog> own;
  if ((c.has_sharing || (c.has_infer && c.infer.has_sharing)) && !c.vgpu_catalog.empty()) own = std::make_unique<vgpu::Catalog>(vgpu::Catalog::load(c.vgpu_catalog));
  const vgpu::Catalog& catalog = own ? *own : vgpu::Catalog::builtin();
  for (int rep = 1; rep <= c.repeats; ++rep) {
    for (const auto& profile : c.profiles) {
      if (c.has_train) {
        for (const auto& m : c.train.models)
          for_each_axis_combo(c.train.axes, PointKind::train, [&](const std::vector<std::string>& combo) {
            for (int n : c.nodes) {
              const auto values = n == 1 ? at_one_rank(c.train.axes, PointKind::train, combo) : combo;
              if (!values) continue;
              for (const auto& t : n == 1 ? std::vector<std::string>{"none"} : c.transports) {
                SweepPoint p = model_point(PointKind::train, m.model, m.batch, m.image_size, n, t, profile, rep);
                p.axes = *values;
                p.id = "train/" + m.model + "/b" + std::to_string(m.batch) + size_suffix(m.image_size) +
                       axes_id(PointKind::train, p.axes) + "/n" + std::to_string(n) + "/" + t + "/" + profile;
                p.skip = train_unfit(c, p);
                visit(p);
              }
            }
          });
      }
      if (c.has_collectives && profile == c.profiles.front()) {
        for (int n : c.nodes) {
          if (n < 2) continue;
          for_each_axis_combo(c.collectives.axes, PointKind::collectives, [&](const std::vector<std::string>& values) {
            for (const auto& t : c.transports) {
              SweepPoint p;
              p.kind = PointKind::collectives;
              p.axes = values;
              p.nodes = n;
              p.transport = t;
              p.profile = "none";
              p.repeat = rep;
              p.id = "collectives" + axes_id(PointKind::collectives, values) + "/n" + std::to_string(n) + "/" + t + "/none";
              p.skip = collectives_unfit(c, p);
              visit(p);
            }
          });
        }
      }
      if (c.has_infer && profile == c.profiles.front()) for_each_infer_point(c.infer, catalog, rep, visit);
      if (c.has_migrate && profile == c.profiles.front()) for_each_migrate_point(c.migrate, rep, visit);
      if (c.has_remote && profile == c.profiles.front()) for_each_remote_point(c.remote, rep, visit);
      const vgpu::Profile* vp = profile == "none" ? nullptr : catalog.find(profile);
      if (c.has_sharing && vp && vp->time_sliced) {
        for (const auto& m : c.train.models) {
          for (const auto& policy : c.sharing.policies) {
            for (int vms : shared_vm_counts(c.sharing))
              visit(shared_point(model_point(PointKind::share, m.model, m.batch, m.image_size, 1, "none", vp->name, rep),
                                 "share/" + m.model + "/b" + std::to_string(m.batch) + size_suffix(m.image_size), *vp,
                                 policy, vms));
          }
        }
      }
    }
  }
}

int point_ranks(const SweepConfig& c, const SweepPoint& p) { return p.nodes * c.cluster.ranks_per_node; }

int cluster_nodes(const SweepConfig& c) {
  int most = *std::max_element(c.nodes.begin(), c.nodes.end());
  if (c.has_migrate) most = std::max({most, c.migrate.nodes, c.migrate.target_node() + 1});
  if (c.has_remote && !c.remote.links.empty()) most = std::max(most, 2);
  return most;
}

std::vector<SweepPoint> expand_points(const SweepConfig& c) {
  std::vector<SweepPoint> points;
  for_each_point(c, [&](const SweepPoint& p) { points.push_back(p); });
  return points;
}

std::string config_hash(const SweepConfig& c) { return auth::sha256_hex(to_yaml(c)).substr(0, 16); }

}  // namespace ringbench
