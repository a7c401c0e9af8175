#include "vgpu/catalog.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "base/errors.h"
#include "base/input_file.h"
#include "base/text.h"
#include "ringbench/vgpu_catalog_data.h"

namespace ringbench::vgpu {
namespace {

const std::vector<std::string> kSeries{"Q", "B", "A", "C", "MIG-C"};
const std::vector<std::string> kWholeGpu{"passthrough", "bare-metal"};
// The letters a vGPU type name ends in: Q, B, A, C, and CME (a MIG slice with the media engines).
const std::vector<std::string> kTypeLetters{"Q", "B", "A", "C", "CME"};
constexpr int kMaxInstancesLimit = 1024;

bool iequals(std::string_view a, std::string_view b) { return lower(a) == lower(b); }
bool is_digit(char ch) { return std::isdigit(static_cast<unsigned char>(ch)) != 0; }
bool is_alpha(char ch) { return std::isalpha(static_cast<unsigned char>(ch)) != 0; }
bool is_alnum(char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0; }

std::string join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// A model token as NVIDIA prefixes its profiles: a letter, then letters and digits, with at
// least one digit ("T4", "P40", "A100DX", "RTX6000P").
bool is_model_token(std::string_view s) {
  if (s.empty() || !is_alpha(s[0])) return false;
  bool digit = false;
  for (char ch : s) {
    if (!is_alnum(ch)) return false;
    digit = digit || is_digit(ch);
  }
  return digit;
}

// What follows "<model>-" in a vGPU type name: "<GB><letters>[<digits>]" for time-sliced types
// ("4C", "2B4"), "<slices>-<GB><letters>" for MIG-backed ones ("1-5C", "1-10CME").
struct TypeSuffix {
  bool mig = false;
  std::string letters;  // upper case
};
std::optional<TypeSuffix> parse_type_suffix(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    const size_t b = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    return i - b;
  };
  TypeSuffix t;
  if (digits() == 0) return std::nullopt;
  if (i < s.size() && s[i] == '-') {
    ++i;
    if (digits() == 0) return std::nullopt;
    t.mig = true;
  }
  const size_t b = i;
  while (i < s.size() && is_alpha(s[i])) ++i;
  if (i == b) return std::nullopt;
  t.letters = upper(s.substr(b, i - b));
  digits();  // "B4": a B-series type with four displays
  if (i != s.size()) return std::nullopt;
  return t;
}

[[noreturn]] void fail(const std::string& origin, const std::string& key, const std::string& what) {
  throw Error(origin + ": " + key + ": " + what);
}

std::string describe(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "nothing";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return quote_excerpt(n.Scalar());  // never a whole file's first line
}

// Reads one YAML mapping, remembering where it is, so every error names its key.
class Reader {
 public:
  Reader(YAML::Node node, std::string where, const std::string& origin)
      : node_(std::move(node)), where_(std::move(where)), origin_(origin) {
    if (!node_.IsMap())
      // The root as text is the file's first line: named, never shown.
      fail(where_.empty() ? "the file" : where_,
           "must be a mapping of keys to values (got " +
               (where_.empty() && node_.IsScalar() ? std::string("plain text") : describe(node_)) + ")");
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const { vgpu::fail(origin_, key, what); }
  std::string key(const std::string& k) const { return where_.empty() ? k : where_ + "." + k; }

  // Every key must be known (a typo must not pass silently) and every required key present.
  void keys(const std::vector<std::string>& allowed) const {
    std::set<std::string> seen;
    for (const auto& kv : node_) {
      const std::string k = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
        fail(key(k), "unknown key; allowed here: " + join(allowed));
      if (!seen.insert(k).second) fail(key(k), "given twice");
    }
    for (const auto& k : allowed)
      if (!node_[k]) fail(key(k), "missing");
  }
  YAML::Node at(const std::string& k) const { return node_[k]; }

  std::string text(const std::string& k) const { return scalar_text(node_[k], key(k)); }
  int64_t integer(const std::string& k, int64_t min) const {
    const int64_t v = scalar_int(node_[k], key(k), "");
    if (v < min) fail(key(k), "must be >= " + std::to_string(min) + " (got " + std::to_string(v) + ")");
    return v;
  }
  std::vector<std::string> texts(const std::string& k) const {
    const YAML::Node v = node_[k];
    if (!v.IsSequence() || v.size() == 0) fail(key(k), "must be a non-empty list of names (got " + describe(v) + ")");
    std::vector<std::string> out;
    for (size_t i = 0; i < v.size(); ++i) out.push_back(scalar_text(v[i], key(k) + "[" + std::to_string(i) + "]"));
    return out;
  }

  std::string scalar_text(const YAML::Node& v, const std::string& k, const std::string& field = "") const {
    if (!v.IsScalar() || v.Scalar().empty()) fail(k, field + "must be a non-empty string (got " + describe(v) + ")");
    return v.Scalar();
  }
  // `field`: what the value is, when the key alone does not say ("framebuffer ").
  int64_t scalar_int(const YAML::Node& v, const std::string& k, const std::string& field) const {
    if (v.IsScalar()) {
      try {
        return v.as<int64_t>();
      } catch (const YAML::Exception&) {
      }
    }
    fail(k, field + "must be an integer (got " + describe(v) + ")");
  }

 private:
  YAML::Node node_;
  std::string where_;
  const std::string& origin_;
};

// The catalog-wide set of names, case-insensitive, for duplicate checks.
class NameSet {
 public:
  // The earlier key that used `name`, or "" when it is new.
  std::string add(const std::string& name, const std::string& key) {
    const auto [it, fresh] = seen_.emplace(lower(name), key);
    return fresh ? std::string() : it->second;
  }

 private:
  std::map<std::string, std::string> seen_;
};

std::string strip_nvidia(const std::string& board) {
  const std::string t = trim(board);
  return iequals(std::string_view(t).substr(0, 7), "NVIDIA ") ? trim(std::string_view(t).substr(7)) : t;
}

Profile parse_row(const Reader& r, const YAML::Node& row, const std::string& where, const GpuModel& g) {
  if (!row.IsSequence() || row.size() != 4)
    r.fail(where, "must be a row [name, framebuffer_mib, max_instances, series] (got " +
                      (row.IsSequence() ? std::to_string(row.size()) + " items" : describe(row)) + ")");
  Profile p;
  p.gpu = g.model;
  p.name = r.scalar_text(row[0], where, "name (1st item) ");
  p.framebuffer_mib = r.scalar_int(row[1], where, "framebuffer (MiB, 2nd item) ");
  const int64_t max = r.scalar_int(row[2], where, "max instances (3rd item) ");
  p.series = r.scalar_text(row[3], where, "series (4th item) ");

  if (p.framebuffer_mib < 1)
    r.fail(where, "framebuffer must be >= 1 MiB (got " + std::to_string(p.framebuffer_mib) + ")");
  if (max < 1) r.fail(where, "max instances must be >= 1 (got " + std::to_string(max) + ")");
  if (max > kMaxInstancesLimit)
    r.fail(where,
           "max instances must be <= " + std::to_string(kMaxInstancesLimit) + " (got " + std::to_string(max) + ")");
  p.max_instances = static_cast<int>(max);
  if (std::find(kSeries.begin(), kSeries.end(), p.series) == kSeries.end())
    r.fail(where, "series must be one of " + join(kSeries) + " (got '" + p.series + "')");
  p.time_sliced = p.series != "MIG-C";

  // The name must be NVIDIA's "<model>-<GB><series letter>" ("<model>-<slices>-<GB>C" when
  // MIG-backed): a row copied under the wrong GPU, or with the wrong series, is a data error.
  const std::string prefix = g.model + "-";
  const std::optional<TypeSuffix> suffix =
      p.name.rfind(prefix, 0) == 0 ? parse_type_suffix(std::string_view(p.name).substr(prefix.size())) : std::nullopt;
  if (!suffix)
    r.fail(where, "name '" + p.name + "' is not a vGPU type of " + g.model + " (" + prefix + "<GB><series>, or " +
                      prefix + "<slices>-<GB>C when MIG-backed)");
  const bool mig = p.series == "MIG-C";
  if (suffix->mig != mig || suffix->letters[0] != p.series.back())
    r.fail(where,
           "name '" + p.name + "' does not match series " + p.series +
               (mig ? " (MIG-backed names are <model>-<slices>-<GB>C)" : " (the letter after the size is the series)"));

  // One GPU's vGPUs of one type share its memory. NVIDIA's counts respect this for every type
  // listed, MIG-backed ones included (their binding limit is the GPU's compute slices, which
  // NVIDIA's counts already reflect), so a violation is a typo in the data.
  if (p.framebuffer_mib * p.max_instances > g.memory_mib)
    r.fail(where, "framebuffer x max instances = " + std::to_string(p.framebuffer_mib) + " x " +
                      std::to_string(p.max_instances) + " MiB exceeds " + g.model + "'s " +
                      std::to_string(g.memory_mib) + " MiB");
  return p;
}

}  // namespace

Catalog Catalog::parse(const std::string& yaml, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw Error(origin + ": not valid YAML: " + e.what());
  }
  const Reader r(root, "", origin);
  r.keys({"source", "gpus", "whole_gpu"});

  Catalog c;
  c.origin_ = origin;
  c.source_ = trim(r.text("source"));

  const YAML::Node gpus = r.at("gpus");
  if (!gpus.IsSequence() || gpus.size() == 0)
    r.fail("gpus", "must be a non-empty list of {model, description, boards, memory_mib, profiles}");
  NameSet models, boards, names;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const std::string where = "gpus[" + std::to_string(i) + "]";
    const Reader gr(gpus[i], where, origin);
    gr.keys({"model", "description", "boards", "memory_mib", "profiles"});
    GpuModel g;
    g.model = gr.text("model");
    if (!is_model_token(g.model))
      gr.fail(gr.key("model"),
              "'" + g.model + "' is not a model key (letters and digits, starting with a letter, e.g. T4, A100D)");
    if (const std::string prev = models.add(g.model, gr.key("model")); !prev.empty())
      gr.fail(gr.key("model"), "duplicate model '" + g.model + "' (also " + prev + ")");
    g.description = gr.text("description");
    g.boards = gr.texts("boards");
    for (size_t b = 0; b < g.boards.size(); ++b) {
      const std::string key = gr.key("boards") + "[" + std::to_string(b) + "]";
      if (const std::string prev = boards.add(strip_nvidia(g.boards[b]), key); !prev.empty())
        gr.fail(key, "duplicate board '" + g.boards[b] + "' (also " + prev + ")");
    }
    g.board = g.boards.front();
    g.memory_mib = gr.integer("memory_mib", 1);
    if (g.memory_mib > (int64_t{1} << 30)) gr.fail(gr.key("memory_mib"), "implausibly large (over 1 PiB)");

    const YAML::Node rows = gr.at("profiles");
    if (!rows.IsSequence() || rows.size() == 0)
      gr.fail(gr.key("profiles"), "must be a non-empty list of rows [name, framebuffer_mib, max_instances, series]");
    for (size_t k = 0; k < rows.size(); ++k) {
      const std::string key = gr.key("profiles") + "[" + std::to_string(k) + "]";
      Profile p = parse_row(gr, rows[k], key, g);
      if (const std::string prev = names.add(p.name, key); !prev.empty())
        gr.fail(key, "duplicate profile '" + p.name + "' (also " + prev + ")");
      c.profiles_.push_back(std::move(p));
    }
    c.gpus_.push_back(std::move(g));
  }

  const std::vector<std::string> whole = r.texts("whole_gpu");
  for (size_t i = 0; i < whole.size(); ++i) {
    const std::string key = "whole_gpu[" + std::to_string(i) + "]";
    if (std::find(kWholeGpu.begin(), kWholeGpu.end(), whole[i]) == kWholeGpu.end())
      r.fail(key, "'" + whole[i] + "' is not one of: " + join(kWholeGpu));
    if (const std::string prev = names.add(whole[i], key); !prev.empty())
      r.fail(key, "duplicate entry '" + whole[i] + "' (also " + prev + ")");
    Profile p;
    p.name = p.series = whole[i];
    p.framebuffer_mib = 0;
    p.max_instances = 1;
    p.time_sliced = false;
    c.profiles_.push_back(std::move(p));
  }
  for (const auto& w : kWholeGpu)
    if (std::find(whole.begin(), whole.end(), w) == whole.end())
      r.fail("whole_gpu", "must list " + join(kWholeGpu, " and ") + " (" + w + " is missing)");
  return c;
}

Catalog Catalog::load(const std::string& path) {
  return parse(read_input_file(path, "the vGPU catalog", kMaxConfigBytes), path);
}

const Catalog& Catalog::builtin() {
  static const Catalog catalog = parse(kBuiltinCatalog, "built-in");
  return catalog;
}

const Profile* Catalog::find(const std::string& name) const {
  for (const auto& p : profiles_)
    if (iequals(p.name, name)) return &p;
  return nullptr;
}

const GpuModel* Catalog::gpu(const std::string& model) const {
  for (const auto& g : gpus_)
    if (iequals(g.model, model)) return &g;
  return nullptr;
}

const GpuModel* Catalog::gpu_for_board(const std::string& board_name) const {
  const std::string want = strip_nvidia(board_name);
  for (const auto& g : gpus_)
    for (const auto& b : g.boards)
      if (iequals(strip_nvidia(b), want)) return &g;
  return nullptr;
}

std::vector<const Profile*> Catalog::profiles_of(const std::string& model) const {
  std::vector<const Profile*> out;
  for (const auto& p : profiles_)
    if (!p.gpu.empty() && iequals(p.gpu, model)) out.push_back(&p);
  return out;
}

std::string Catalog::unknown_profile_message(const std::string& name) const {
  const std::string head = "unknown vGPU profile '" + name + "'";
  const GpuModel* g = gpu(name.substr(0, name.find('-')));
  if (g != nullptr) {
    std::vector<std::string> names;
    for (const Profile* p : profiles_of(g->model)) names.push_back(p->name);
    return head + "; " + g->model + " has " + join(names) + " (see `ringbench vgpu profiles`)";
  }
  std::vector<std::string> models;
  for (const auto& m : gpus_) models.push_back(m.model);
  return head + "; the catalog knows the GPUs " + join(models) + " (profiles are <GPU>-<type>, e.g. T4-4C) and " +
         join(kWholeGpu, " and ") + "; run `ringbench vgpu profiles` to list them";
}

std::optional<std::string> profile_from_device_name(const std::string& device_name) {
  std::string s = trim(device_name);
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (const char* prefix : {"GRID ", "NVIDIA ", "Tesla "}) {
      const size_t n = std::strlen(prefix);
      if (s.size() > n && iequals(std::string_view(s).substr(0, n), prefix)) {
        s = trim(std::string_view(s).substr(n));
        stripped = true;
      }
    }
  }
  // One token "<model>-<type>": board names carry spaces ("A100 80GB PCIe") or a form factor
  // after the model ("A100-SXM4-40GB", "V100-PCIE-16GB"), which no type suffix parses as.
  if (std::any_of(s.begin(), s.end(), [](char ch) { return std::isspace(static_cast<unsigned char>(ch)) != 0; }))
    return std::nullopt;
  const size_t dash = s.find('-');
  if (dash == std::string::npos || !is_model_token(std::string_view(s).substr(0, dash))) return std::nullopt;
  const std::optional<TypeSuffix> t = parse_type_suffix(std::string_view(s).substr(dash + 1));
  if (!t || std::find(kTypeLetters.begin(), kTypeLetters.end(), t->letters) == kTypeLetters.end()) return std::nullopt;
  return s;
}

}  // namespace ringbench::vgpu
