#include "runner/sweep/axis_lists.h"

#include <algorithm>

#include "runner/record/point.h"
#include "runner/record/yaml_reader.h"

namespace ringbench {
namespace {

std::vector<std::string> read_values(const YamlReader& r, const Axis& a) {
  const std::string& key = a.config();
  const YAML::Node n = r.at(key);
  if (!n) r.fail(r.key(key), "missing");
  std::vector<std::string> raw;
  if (n.IsScalar()) raw.push_back(n.Scalar());
  else if (n.IsSequence() && n.size() > 0)
    for (size_t i = 0; i < n.size(); ++i) {
      if (!n[i].IsScalar()) r.fail(r.key(key) + "[" + std::to_string(i) + "]", "must be a value, not a list or mapping");
      raw.push_back(n[i].Scalar());
    }
  else r.fail(r.key(key), "must be a value or a non-empty list of values");
  std::vector<std::string> out;
  for (const auto& v : raw) {
    std::string why;
    const auto c = axis_canonical(a, v, why);
    if (!c) r.fail(r.key(key), why);
    if (std::find(out.begin(), out.end(), *c) != out.end()) r.fail(r.key(key), v + " is listed twice");
    out.push_back(*c);
  }
  return out;
}

void combos(const AxisLists& lists, const std::vector<size_t>& idx, size_t depth, std::vector<std::string>& values,
            const std::function<void(const std::vector<std::string>&)>& visit) {
  if (depth == idx.size()) return visit(values);
  for (const auto& v : lists.values[idx[depth]]) {
    values[idx[depth]] = v;
    combos(lists, idx, depth + 1, values, visit);
  }
}

// settings: [{fusion_mb: 4, compression: fp16}, ...]: each a mapping of single values.
void read_settings(const YamlReader& r, PointKind kind, AxisLists& lists) {
  const YAML::Node list = r.at("settings");
  if (!list.IsSequence() || list.size() == 0) r.fail(r.key("settings"), "must be a non-empty list of {axis: value}");
  for (size_t s = 0; s < list.size(); ++s) {
    const YamlReader one(list[s], r.key("settings") + "[" + std::to_string(s) + "]", r.origin());
    one.only(axis_keys(kind));
    std::vector<std::string> values = axis_defaults();
    for (size_t i : axes_of(kind)) {
      values[i] = lists.values[i].front();
      if (!one.has(sweep_axes()[i].config())) continue;
      const auto v = read_values(one, sweep_axes()[i]);
      if (v.size() != 1) one.fail(one.key(sweep_axes()[i].config()), "a setting takes one value");
      values[i] = v.front();
    }
    if (std::find(lists.settings.begin(), lists.settings.end(), values) != lists.settings.end())
      r.fail(r.key("settings") + "[" + std::to_string(s) + "]", "repeats an earlier setting");
    lists.settings.push_back(values);
  }
}

}  // namespace

std::vector<std::vector<std::string>> AxisLists::one_default_each() {
  std::vector<std::vector<std::string>> v;
  for (const auto& d : axis_defaults()) v.push_back({d});
  return v;
}

bool uses_value(const AxisLists& lists, size_t axis, const std::string& value) {
  if (!lists.settings.empty())
    return std::any_of(lists.settings.begin(), lists.settings.end(),
                       [&](const std::vector<std::string>& s) { return s[axis] == value; });
  const auto& v = lists.values[axis];
  return std::find(v.begin(), v.end(), value) != v.end();
}

std::vector<std::string> axis_keys(PointKind kind) {
  std::vector<std::string> keys;
  for (size_t i : axes_of(kind)) keys.push_back(sweep_axes()[i].config());
  return keys;
}

std::vector<std::string> axis_keys_and_settings(PointKind kind) {
  auto keys = axis_keys(kind);
  if (!keys.empty()) keys.push_back("settings");
  return keys;
}

AxisLists read_axis_lists(const YamlReader& r, PointKind kind) {
  AxisLists lists;
  for (size_t i : axes_of(kind))
    if (r.has(sweep_axes()[i].config())) lists.values[i] = read_values(r, sweep_axes()[i]);
  if (r.has("settings")) read_settings(r, kind, lists);
  return lists;
}

void write_axis_lists(const AxisLists& lists, PointKind kind, nlohmann::json& section) {
  for (size_t i : axes_of(kind)) {
    const Axis& a = sweep_axes()[i];
    const auto& v = lists.values[i];
    if (a.type != AxisType::name && a.type != AxisType::flag && v.size() == 1) {
      section[a.config()] = axis_json(a, v.front());
      continue;
    }
    nlohmann::json list = nlohmann::json::array();
    for (const auto& x : v) list.push_back(axis_json(a, x));
    section[a.config()] = list;
  }
  if (lists.settings.empty()) return;
  nlohmann::json settings = nlohmann::json::array();
  for (const auto& values : lists.settings) {
    nlohmann::json one = nlohmann::json::object();
    for (size_t i : axes_of(kind)) one[sweep_axes()[i].config()] = axis_json(sweep_axes()[i], values[i]);
    settings.push_back(one);
  }
  section["settings"] = settings;
}

void for_each_axis_combo(const AxisLists& lists, PointKind kind,
                         const std::function<void(const std::vector<std::string>&)>& visit) {
  if (!lists.settings.empty()) {
    for (const auto& values : lists.settings) visit(values);
    return;
  }
  std::vector<std::string> values = axis_defaults();
  combos(lists, axes_of(kind), 0, values, visit);
}

std::optional<std::vector<std::string>> at_one_rank(const AxisLists& lists, PointKind kind,
                                                    std::vector<std::string> values) {
  if (!lists.settings.empty()) {  // settings run as written: the first one
    if (values == lists.settings.front()) return values;
    return std::nullopt;
  }
  for (size_t i : axes_of(kind)) {
    if (!sweep_axes()[i].communication) continue;
    if (values[i] != lists.values[i].front()) return std::nullopt;
    values[i] = sweep_axes()[i].default_value;
  }
  return values;
}

std::string axes_id(PointKind kind, const std::vector<std::string>& values) {
  std::string id;
  for (size_t i : axes_of(kind))
    if (values[i] != sweep_axes()[i].default_value)
      id += "/" + sweep_axes()[i].id_prefix + (sweep_axes()[i].type == AxisType::flag ? "" : values[i]);
  return id;
}

std::vector<std::string> axes_args(PointKind kind, const std::vector<std::string>& values) {
  std::vector<std::string> args;
  for (size_t i : axes_of(kind)) {
    if (values[i] == sweep_axes()[i].default_value || sweep_axes()[i].flag.empty()) continue;
    if (sweep_axes()[i].type == AxisType::flag)
      args.push_back(sweep_axes()[i].flag);  // a flag's only value off its default: true
    else
      args.insert(args.end(), {sweep_axes()[i].flag, values[i]});
  }
  return args;
}

}  // namespace ringbench
