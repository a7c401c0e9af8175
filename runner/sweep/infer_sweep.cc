#include "runner/sweep/infer_sweep.h"

#include <algorithm>
#include <sstream>

#include "models/zoo.h"
#include "runner/sweep/model_entry.h"
#include "runner/sweep/sweep_config.h"
#include "runner/record/yaml_reader.h"
#include "vgpu/catalog.h"
#include "runner/record/point.h"
#include "runner/analysis/format.h"

namespace ringbench {
namespace {

const std::vector<std::string> kScenarios{"offline", "single-stream", "server"};

InferModel parse_model(const YamlReader& r, const YAML::Node& node, const std::string& where) {
  InferModel m;
  if (node.IsScalar()) {
    m.model = node.as<std::string>();
  } else {
    YamlReader mr(node, where, r.origin());
    mr.only({"model", "image_size", "max_batch"});
    if (!mr.has("model")) fail_missing_model(mr, where);
    mr.get("model", m.model, "a string");
    mr.get_int("image_size", m.image_size, 0, kMaxImageSize);
    mr.get_int("max_batch", m.max_batch, 1, kMaxBatch);
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

// r's `scenarios`, each one of kScenarios.
std::vector<std::string> parse_scenarios(const YamlReader& r) {
  std::vector<std::string> out = r.list<std::string>("scenarios", "scenario names");
  for (const auto& sc : out)
    if (std::find(kScenarios.begin(), kScenarios.end(), sc) == kScenarios.end())
      r.fail(r.key("scenarios"), quote_excerpt(sc) + " is not one of: " + join_names(kScenarios));
  return out;
}

// The `sharing` mapping of the section: the top level's keys, and what the VMs run.
void parse_infer_sharing(const YamlReader& r, const vgpu::Catalog& catalog, InferSweep& s) {
  const YamlReader sr(r.at("sharing"), r.key("sharing"), r.origin());
  s.has_sharing = true;
  s.sharing = parse_sharing(sr, {"scenarios", "models"});
  if (!has_time_sliced(s.profiles, catalog))
    r.fail(r.key("sharing"), "needs a time-sliced vGPU profile under " + r.key("profiles") +
                                 " (e.g. T4-4C; see `ringbench vgpu profiles`)");
  if (sr.has("scenarios")) s.sharing_scenarios = parse_scenarios(sr);
  if (sr.has("models")) s.sharing_models = sr.list<std::string>("models", "model names");
  for (const auto& m : s.sharing_models)
    if (std::none_of(s.models.begin(), s.models.end(), [&](const InferModel& x) { return x.model == m; }))
      sr.fail(sr.key("models"), quote_excerpt(m) + " is not one of the models of " + r.key("models"));
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
  if (s.min_duration_s != -1 && !(s.min_duration_s >= 0 && s.min_duration_s <= kMaxTimeoutS))
    r.fail(r.key("min_duration"), "must be from 0 to " + number_text(kMaxTimeoutS) +
                                      " seconds, or -1 for LoadGen's 600 s (got " + number_text(s.min_duration_s) + ")");
  r.get("min_queries", s.min_queries, "an integer");
  if (s.min_queries < -1 || s.min_queries > (1 << 30))
    r.fail(r.key("min_queries"), "must be from 0 to " + number_text(1 << 30) + ", or -1 for LoadGen's per scenario (got " +
                                     number_text(s.min_queries) + ")");
  r.get_double("max_duration", s.max_duration_s, 0, kMaxTimeoutS);
  if (!(s.max_duration_s > 0)) r.fail(r.key("max_duration"), "must be > 0 seconds");
  if (s.min_duration_s > s.max_duration_s) r.fail(r.key("min_duration"), "must be <= max_duration");
}

}  // namespace

InferSweep parse_infer(const YamlReader& r, const vgpu::Catalog& catalog) {
  InferSweep s;
  r.only({"models", "scenarios", "batches", "latency_bound_ms", "batch_timeout_ms", "server_qps", "min_duration",
          "min_queries", "max_duration", "backend", "profiles", "sharing"});
  s.models = parse_models(r);
  if (r.has("scenarios")) s.scenarios = parse_scenarios(r);
  parse_batches(r, s);
  r.get("latency_bound_ms", s.latency_bound_ms, "a number of milliseconds");
  r.check_range("latency_bound_ms", s.latency_bound_ms, 1e-3, kMaxTimeoutS * 1e3);
  r.get_double("batch_timeout_ms", s.batch_timeout_ms, 0, 60e3);
  r.get_double("server_qps", s.server_qps, 0, 1e7);
  parse_rules(r, s);
  r.get_choice("backend", s.backend, {"auto", "onednn", "reference", "cudnn"});
  if (r.has("profiles")) s.profiles = parse_profiles(r, catalog);
  if (r.has("sharing")) parse_infer_sharing(r, catalog, s);
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
        if (s.sharing_models.empty() ||
            std::find(s.sharing_models.begin(), s.sharing_models.end(), m.model) != s.sharing_models.end())
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
  if (s.has_sharing) {
    j["sharing"] = to_json(s.sharing);
    if (!s.sharing_scenarios.empty()) j["sharing"]["scenarios"] = s.sharing_scenarios;
    if (!s.sharing_models.empty()) j["sharing"]["models"] = s.sharing_models;
  }
  return j;
}

std::vector<std::string> infer_args(const InferSweep& s, const std::string& model, int image_size, int max_batch,
                                    uint64_t seed, bool shared) {
  const std::vector<std::string>& run = shared && !s.sharing_scenarios.empty() ? s.sharing_scenarios : s.scenarios;
  const bool offline = std::find(run.begin(), run.end(), "offline") != run.end();
  std::string scenarios;
  for (const auto& sc : run) {
    if (!scenarios.empty()) scenarios += ',';
    scenarios += sc;
  }
  std::vector<std::string> a = {"infer", "--model", model, "--max-batch", std::to_string(max_batch),
                                "--backend", s.backend, "--scenarios", scenarios,
                                "--min-duration", report::num6(s.min_duration_s), "--min-queries", std::to_string(s.min_queries),
                                "--max-duration", report::num6(s.max_duration_s), "--seed", std::to_string(seed)};
  if (image_size) a.insert(a.end(), {"--image-size", std::to_string(image_size)});
  if (offline && shared) a.insert(a.end(), {"--batches", std::to_string(max_batch)});
  if (offline && !shared && !s.batches.empty()) {
    std::string b;
    for (int x : s.batches) {
      if (!b.empty()) b += ',';
      b += std::to_string(x);
    }
    a.insert(a.end(), {"--batches", b});
  }
  if (std::find(run.begin(), run.end(), "server") != run.end())
    a.insert(a.end(), {"--latency-bound-ms", report::num6(s.latency_bound_ms), "--batch-timeout-ms", report::num6(s.batch_timeout_ms),
                       "--server-qps", report::num6(s.server_qps)});
  return a;
}

}  // namespace ringbench
