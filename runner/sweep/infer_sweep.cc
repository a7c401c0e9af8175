#include "runner/sweep/infer_sweep.h"

#include <algorithm>
#include <sstream>

#include "models/zoo.h"
#include "runner/sweep/model_entry.h"
#include "runner/sweep/sweep_config.h"
#include "runner/sweep/yaml_reader.h"
#include "vgpu/catalog.h"

namespace ringbench {
namespace {

const std::vector<std::string> kScenarios{"offline", "single-stream", "server"};

std::string num(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

InferModel parse_model(const YamlReader& r, const YAML::Node& node, const std::string& where) {
  InferModel m;
  if (node.IsScalar()) {
    m.model = node.as<std::string>();
  } else {
    YamlReader mr(node, where, r.origin());
    mr.only({"model", "image_size", "max_batch"});
    if (!mr.has("model")) fail_missing_model(mr, where);
    mr.get("model", m.model, "a string");
    mr.get_int("image_size", m.image_size, 0);
    mr.get_int("max_batch", m.max_batch, 1);
    if (m.max_batch > 4096) mr.fail(where + ".max_batch", "must be <= 4096 (got " + std::to_string(m.max_batch) + ")");
  }
  check_model_entry(r, where, m.model, m.image_size);
  return m;
}

std::vector<InferModel> parse_models(const YamlReader& r) {
  if (!r.has("models"))
    r.fail(r.key("models"), "missing; list the models to serve, e.g. [{model: mobilenet_v1, image_size: 96, max_batch: 8}]");
  const YAML::Node models = r.at("models");
  if (!models.IsSequence() || models.size() == 0)
    r.fail(r.key("models"), "must be a non-empty list of {model, image_size, max_batch}");
  std::vector<InferModel> out;
  for (size_t i = 0; i < models.size(); ++i) {
    const std::string where = r.key("models") + "[" + std::to_string(i) + "]";
    const InferModel m = parse_model(r, models[i], where);
    for (const auto& o : out)
      if (o.model == m.model && o.image_size == m.image_size && o.max_batch == m.max_batch)
        r.fail(where, m.model + " with image_size " + std::to_string(m.image_size) + " and max_batch " +
                          std::to_string(m.max_batch) + " is listed twice");
    out.push_back(m);
  }
  return out;
}

void parse_scenarios(const YamlReader& r, InferSweep& s) {
  if (!r.has("scenarios")) return;
  s.scenarios = r.list<std::string>("scenarios", "scenario names");
  for (const auto& sc : s.scenarios)
    if (std::find(kScenarios.begin(), kScenarios.end(), sc) == kScenarios.end())
      r.fail(r.key("scenarios"), "'" + sc + "' is not one of: " + join_names(kScenarios));
}

void parse_batches(const YamlReader& r, InferSweep& s) {
  if (!r.has("batches")) return;
  s.batches = r.list<int>("batches", "batch sizes");
  int smallest_max = s.models.front().max_batch;
  for (const auto& m : s.models) smallest_max = std::min(smallest_max, m.max_batch);
  for (int b : s.batches)
    if (b < 1 || b > smallest_max)
      r.fail(r.key("batches"), std::to_string(b) + " is outside 1..max_batch (" + std::to_string(smallest_max) +
                                   ", the smallest of the models' max_batch)");
}

void parse_rules(const YamlReader& r, InferSweep& s) {
  r.get("min_duration", s.min_duration_s, "a number of seconds");
  if (s.min_duration_s < 0 && s.min_duration_s != -1)
    r.fail(r.key("min_duration"), "must be >= 0 seconds, or -1 for LoadGen's 600 s");
  r.get("min_queries", s.min_queries, "an integer");
  if (s.min_queries < -1) r.fail(r.key("min_queries"), "must be >= 0, or -1 for LoadGen's per scenario");
  r.get_double("max_duration", s.max_duration_s, 0);
  if (!(s.max_duration_s > 0)) r.fail(r.key("max_duration"), "must be > 0 seconds");
  if (s.min_duration_s > s.max_duration_s) r.fail(r.key("min_duration"), "must be <= max_duration");
}

bool wants(const InferSweep& s, const std::string& scenario) {
  return std::find(s.scenarios.begin(), s.scenarios.end(), scenario) != s.scenarios.end();
}

}  // namespace

InferSweep parse_infer(const YamlReader& r, const vgpu::Catalog& catalog) {
  InferSweep s;
  r.only({"models", "scenarios", "batches", "latency_bound_ms", "batch_timeout_ms", "server_qps", "min_duration",
          "min_queries", "max_duration", "backend", "profiles", "sharing"});
  s.models = parse_models(r);
  parse_scenarios(r, s);
  parse_batches(r, s);
  r.get("latency_bound_ms", s.latency_bound_ms, "a number of milliseconds");
  if (!(s.latency_bound_ms > 0)) r.fail(r.key("latency_bound_ms"), "must be > 0");
  r.get_double("batch_timeout_ms", s.batch_timeout_ms, 0);
  r.get_double("server_qps", s.server_qps, 0);
  parse_rules(r, s);
  r.get_choice("backend", s.backend, {"auto", "onednn", "reference", "cudnn"});
  if (r.has("profiles")) s.profiles = parse_profiles(r, catalog);
  if (r.has("sharing")) {
    s.has_sharing = true;
    s.sharing = parse_sharing(YamlReader(r.at("sharing"), r.key("sharing"), r.origin()));
    if (!has_time_sliced(s.profiles, catalog))
      r.fail(r.key("sharing"), "needs a time-sliced vGPU profile under " + r.key("profiles") +
                                   " (e.g. T4-4C; see `ringbench vgpu profiles`)");
  }
  return s;
}

void for_each_infer_point(const InferSweep& s, const vgpu::Catalog& catalog, int repeat,
                          const std::function<void(const SweepPoint&)>& visit) {
  const auto base = [](const InferModel& m) {
    return "infer/" + m.model + "/b" + std::to_string(m.max_batch) + size_suffix(m.image_size);
  };
  for (const auto& profile : s.profiles) {
    for (const auto& m : s.models) {
      SweepPoint p = model_point(PointKind::infer, m.model, m.max_batch, m.image_size, 1, "none", profile, repeat);
      p.id = base(m) + "/" + profile;
      visit(p);
    }
    const vgpu::Profile* vp = profile == "none" ? nullptr : catalog.find(profile);
    if (!s.has_sharing || !vp || !vp->time_sliced) continue;
    for (const auto& m : s.models)
      for (const auto& policy : s.sharing.policies)
        for (int vms : shared_vm_counts(s.sharing))
          visit(shared_point(model_point(PointKind::infer, m.model, m.max_batch, m.image_size, 1, "none", vp->name,
                                         repeat), base(m), *vp, policy, vms));
  }
}

nlohmann::json to_json(const InferSweep& s) {
  nlohmann::json models = nlohmann::json::array();
  for (const auto& m : s.models)
    models.push_back({{"model", m.model}, {"image_size", m.image_size}, {"max_batch", m.max_batch}});
  nlohmann::json j = {{"models", models}, {"scenarios", s.scenarios}, {"latency_bound_ms", s.latency_bound_ms},
                      {"batch_timeout_ms", s.batch_timeout_ms}, {"server_qps", s.server_qps},
                      {"min_duration", s.min_duration_s}, {"min_queries", s.min_queries},
                      {"max_duration", s.max_duration_s}, {"backend", s.backend}};
  if (!s.batches.empty()) j["batches"] = s.batches;
  j["profiles"] = s.profiles;
  if (s.has_sharing) j["sharing"] = to_json(s.sharing);
  return j;
}

std::vector<std::string> infer_args(const InferSweep& s, const std::string& model, int image_size, int max_batch,
                                    uint64_t seed) {
  std::string scenarios;
  for (const auto& sc : s.scenarios) {
    if (!scenarios.empty()) scenarios += ',';
    scenarios += sc;
  }
  std::vector<std::string> a = {"infer", "--model", model, "--max-batch", std::to_string(max_batch),
                                "--backend", s.backend, "--scenarios", scenarios,
                                "--min-duration", num(s.min_duration_s), "--min-queries", std::to_string(s.min_queries),
                                "--max-duration", num(s.max_duration_s), "--seed", std::to_string(seed)};
  if (image_size) a.insert(a.end(), {"--image-size", std::to_string(image_size)});
  if (wants(s, "offline") && !s.batches.empty()) {
    std::string b;
    for (int x : s.batches) {
      if (!b.empty()) b += ',';
      b += std::to_string(x);
    }
    a.insert(a.end(), {"--batches", b});
  }
  if (wants(s, "server"))
    a.insert(a.end(), {"--latency-bound-ms", num(s.latency_bound_ms), "--batch-timeout-ms", num(s.batch_timeout_ms),
                       "--server-qps", num(s.server_qps)});
  return a;
}

}  // namespace ringbench
