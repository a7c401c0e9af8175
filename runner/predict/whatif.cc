#include "runner/predict/whatif.h"

#include "base/errors.h"
#include "runner/analysis/format.h"
#include "runner/record/point.h"
#include "runner/record/yaml_reader.h"

namespace ringbench::predict {

namespace {

const std::vector<std::string> kSourceKinds{"published:", "derived:", "measured:", "assumed:"};

WhatIfTransport read_transport(const YamlReader& r) {
  r.only({"name", "link_gbps", "efficiency", "latency_us", "cpu_ns_per_byte"});
  WhatIfTransport t;
  r.get("name", t.name, "a string");
  if (t.name.empty()) r.fail(r.key("name"), "missing");
  t.link_gbps = read_sourced(r, "link_gbps", 1e-3, 1e5);
  t.efficiency = read_sourced(r, "efficiency", 1e-3, 1);
  t.latency_us = read_sourced(r, "latency_us", 0, 1e6);
  t.cpu_ns_per_byte = read_sourced(r, "cpu_ns_per_byte", 0, 1e6);
  return t;
}

WhatIfModel read_model(const YamlReader& r) {
  r.only({"model", "batch", "compute_s", "optimizer_s", "gradient_wire"});
  WhatIfModel m;
  r.get("model", m.model, "a string");
  if (m.model.empty()) r.fail(r.key("model"), "missing");
  r.get_int("batch", m.batch, 1, kMaxBatch);
  m.compute_s = read_sourced(r, "compute_s", 1e-9, 1e6);
  if (r.has("optimizer_s")) m.optimizer_s = read_sourced(r, "optimizer_s", 0, 1e6);
  if (r.has("gradient_wire")) {
    r.get("gradient_wire", m.gradient_wire, "fp32, fp16 or bf16");
    if (m.gradient_wire != "fp32" && m.gradient_wire != "fp16" && m.gradient_wire != "bf16")
      r.fail(r.key("gradient_wire"), "must be fp32, fp16 or bf16");
  }
  return m;
}

template <class T, class F>
std::vector<T> read_list(const YamlReader& r, const std::string& k, F read_one) {
  const YAML::Node v = r.at(k);
  if (!v || !v.IsSequence() || v.size() == 0) r.fail(r.key(k), "must be a non-empty list");
  std::vector<T> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(read_one(YamlReader(v[i], r.key(k) + "[" + std::to_string(i) + "]", r.origin())));
  return out;
}

void read_grid(const YamlReader& root, WhatIf& w) {
  w.grid_link_gbps = {10, 25, 40, 100, 200};
  w.grid_compute_scale = {0.125, 0.25, 0.5, 1, 2};
  if (!root.has("grid")) return;
  YamlReader g(root.at("grid"), "grid", root.origin());
  g.only({"link_gbps", "compute_scale"});
  if (g.has("link_gbps")) w.grid_link_gbps = g.list<double>("link_gbps", "positive numbers");
  if (g.has("compute_scale")) w.grid_compute_scale = g.list<double>("compute_scale", "positive numbers");
  for (double x : w.grid_link_gbps)
    g.check_range("link_gbps", x, 1e-3, 1e5);
  for (double x : w.grid_compute_scale)
    g.check_range("compute_scale", x, 1e-6, 1e6);
}

WhatIf parse_root(const YAML::Node& node, const std::string& origin) {
  YamlReader r(node, "", origin);
  r.only({"name", "description", "baseline", "nodes", "check_nodes", "grid", "transports", "models"});
  WhatIf w;
  w.origin = origin;
  r.get("name", w.name, "a string");
  if (w.name.empty()) r.fail("name", "missing");
  r.get("description", w.description, "a string");
  w.transports = read_list<WhatIfTransport>(r, "transports", read_transport);
  w.models = read_list<WhatIfModel>(r, "models", read_model);
  r.get("baseline", w.baseline, "a string");
  if (w.transports.size() < 2) r.fail("transports", "needs two transports to compare (the first, and the baseline)");
  if (w.baseline.empty()) w.baseline = w.transports.back().name;
  if (std::none_of(w.transports.begin() + 1, w.transports.end(), [&](const auto& t) { return t.name == w.baseline; }))
    r.fail("baseline", "'" + w.baseline + "' is not one of the transports after the first");
  w.nodes = r.has("nodes") ? r.list<int>("nodes", "node counts") : powers_of_two_nodes();
  for (int n : w.nodes)
    r.check_range("nodes", n, 1, kMaxWhatIfNodes);
  r.get_int("check_nodes", w.check_nodes, 2, kMaxWhatIfNodes);
  read_grid(r, w);
  return w;
}

}  // namespace

Sourced read_sourced(const YamlReader& parent, const std::string& k, double min, double max) {
  if (!parent.has(k)) parent.fail(parent.key(k), "missing: {value: NUMBER, source: \"published: ...\"}");
  YamlReader r(parent.at(k), parent.key(k), parent.origin());
  r.only({"value", "source"});
  Sourced s;
  if (!r.has("value")) r.fail(r.key("value"), "missing");
  r.get("value", s.value, "a number");
  if (!(s.value >= min && s.value <= max))
    r.fail(r.key("value"), "must be from " + number_text(min) + " to " + number_text(max) + " (got " + number_text(s.value) + ")");
  r.get("source", s.source, "a string");
  const bool kind_ok = std::any_of(kSourceKinds.begin(), kSourceKinds.end(), [&](const std::string& p) {
    return s.source.rfind(p, 0) == 0 && s.source.size() > p.size() + 1;
  });
  if (!kind_ok)
    r.fail(r.key("source"), "every number needs its source, starting with one of " + join_names(kSourceKinds) +
                                " and saying what (got " + quote_excerpt(s.source) + ")");
  return s;
}

LinkCost WhatIfTransport::cost(double link_gbps_override) const {
  const double gbps = link_gbps_override > 0 ? link_gbps_override : link_gbps.value;
  return {name, latency_us.value * 1e-6, 8 / (gbps * 1e9 * efficiency.value) + cpu_ns_per_byte.value * 1e-9};
}

WhatIf parse_what_if(const std::string& text, const std::string& origin) {
  return parse_yaml(text, origin, parse_root);
}

WhatIf load_what_if(const std::string& path) { return parse_what_if(read_config_file(path, "the what-if file"), path); }

}  // namespace ringbench::predict
