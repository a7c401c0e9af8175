// A YAML mapping read key by key, each error naming its file and key ("quick.yaml:
// train.models[1].batch: must be >= 1 (got 0)"): sweep configs and what-if files.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/errors.h"
#include "base/input_file.h"

namespace ringbench {

inline std::string join_names(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// A number as an error message shows it: 1e-09, 0.5, 86400, 1e+10; an integer in full.
inline std::string number_text(int v) { return std::to_string(v); }
inline std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Reads one YAML mapping, remembering where it is, so every error names its key.
class YamlReader {
 public:
  YamlReader(const YAML::Node& node, std::string where, std::string origin)
      : node_(node), where_(std::move(where)), origin_(std::move(origin)) {
    if (!node_.IsMap()) fail(where_.empty() ? "the file" : where_, "must be a mapping of keys to values");
    // yaml-cpp keeps every entry of a repeated key but node[key] finds only the first: a
    // second value must not be silently ignored.
    std::set<std::string> seen;
    for (const auto& kv : node_) {
      if (!kv.first.IsScalar())
        fail(where_.empty() ? "the file" : where_,
             "a key must be a plain name, not a list or mapping (line " +
                 std::to_string(kv.first.Mark().line + 1) + ")");
      const std::string k = kv.first.Scalar();
      if (!seen.insert(k).second)
        fail(key(k), "appears twice (line " + std::to_string(kv.first.Mark().line + 1) + ")");
    }
  }

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(origin_ + ": " + key + ": " + what);
  }
  std::string key(const std::string& k) const { return where_.empty() ? k : where_ + "." + k; }
  bool has(const std::string& k) const { return bool(node_[k]); }
  YAML::Node at(const std::string& k) const { return node_[k]; }
  const std::string& origin() const { return origin_; }

  // Unknown keys are errors (a typo must not silently fall back to a default).
  void only(const std::vector<std::string>& allowed) const {
    for (const auto& kv : node_) {
      const std::string& k = kv.first.Scalar();  // a scalar: checked by the constructor
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
        fail(key(k), "unknown key; allowed here: " + join_names(allowed));
    }
  }

  template <class T>
  void get(const std::string& k, T& out, const char* type_name) const {
    if (!has(k)) return;
    const YAML::Node v = node_[k];
    if (!v.IsScalar()) fail(key(k), std::string("must be ") + type_name);
    try {
      out = v.as<T>();
    } catch (const YAML::Exception&) {
      fail(key(k), std::string("must be ") + type_name + " (got " + quote_excerpt(v.Scalar()) + ")");
    }
  }
  // Every number has both bounds: a config must not reach an overflow (a timeout of 1e10 s)
  // or a size no run can hold.
  void get_int(const std::string& k, int& out, int min, int max) const {
    get(k, out, "an integer");
    check_range(k, out, min, max);
  }
  void get_double(const std::string& k, double& out, double min, double max) const {
    get(k, out, "a number");
    check_range(k, out, min, max);
  }
  template <class T>
  void check_range(const std::string& k, T v, T min, T max) const {
    if (!(v >= min && v <= max))  // NaN fails too
      fail(key(k), "must be from " + number_text(min) + " to " + number_text(max) + " (got " + number_text(v) + ")");
  }
  void get_choice(const std::string& k, std::string& out, const std::vector<std::string>& allowed) const {
    get(k, out, "a string");
    if (std::find(allowed.begin(), allowed.end(), out) == allowed.end())
      fail(key(k), "'" + out + "' is not one of: " + join_names(allowed));
  }
  template <class T>
  std::vector<T> list(const std::string& k, const char* type_name) const {
    const YAML::Node v = node_[k];
    if (!v.IsSequence() || v.size() == 0) fail(key(k), std::string("must be a non-empty list of ") + type_name);
    std::vector<T> out;
    for (size_t i = 0; i < v.size(); ++i) {
      try {
        out.push_back(v[i].as<T>());
      } catch (const YAML::Exception&) {
        fail(key(k) + "[" + std::to_string(i) + "]", std::string("must be ") + type_name);
      }
      if (std::find(out.begin(), out.end() - 1, out.back()) != out.end() - 1)
        fail(key(k), v[i].Scalar() + " is listed twice");  // every point would run twice
    }
    return out;
  }

 private:
  YAML::Node node_;
  std::string where_, origin_;
};

// The text of a config file; an Error naming `what` ("the sweep config") and the path when it
// cannot be read, is not a regular file or is larger than a config can be.
inline std::string read_config_file(const std::string& path, const std::string& what) {
  return read_input_file(path, what, kMaxConfigBytes);
}

// `text` parsed as YAML and its root handed to `parse(root, origin)`. Every value is checked
// where it is read; a yaml-cpp exception that still escapes (a shape no check foresaw) is a
// clear error about the file too, never a crash.
template <class Parse>
auto parse_yaml(const std::string& text, const std::string& origin, Parse parse) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(origin + ": not valid YAML: " + e.what());
  }
  try {
    return parse(root, origin);
  } catch (const YAML::Exception& e) {
    throw Error(origin + ": " + e.what());
  }
}

}  // namespace ringbench
