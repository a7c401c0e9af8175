#include "runner/record/point.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "base/errors.h"
#include "base/input_file.h"
#include "base/name_table.h"
#include "models/zoo.h"
#include "runner/backends/backend.h"
#include "runner/record/json_fields.h"
#include "runner/record/yaml_reader.h"
#include "vgpu/scheduler.h"

namespace ringbench {
namespace {

using json = nlohmann::json;

constexpr EnumName<PointKind> kKindNames[] = {
    {PointKind::train, "train"}, {PointKind::collectives, "collectives"}, {PointKind::share, "share"},
    {PointKind::infer, "infer"}, {PointKind::migrate, "migrate"}, {PointKind::remote, "remote"}};

PointKind parse_kind(const std::string& s, const std::string& where) {
  if (const auto k = parse_name(kKindNames, s)) return *k;
  throw Error(where + ": \"kind\": " + quote_excerpt(s) + " is none of train, collectives, share, infer, migrate, remote");
}

[[noreturn]] void bad_field(const std::string& where, const char* key, const std::string& why) {
  throw Error(where + ": \"" + key + "\": " + why);
}

int int_in(const json& r, const char* key, int lo, int hi, const std::string& where, std::optional<int> def = {}) {
  if (def && !r.contains(key)) return *def;
  const int v = required_int(r, key, where);
  if (v < lo || v > hi)
    bad_field(where, key, std::to_string(v) + " is out of range (" + std::to_string(lo) + " to " + std::to_string(hi) + ")");
  return v;
}

std::string str_field(const json& r, const char* key, const std::string& where, std::optional<std::string> def = {}) {
  if (def && !r.contains(key)) return *def;
  return required_str(r, key, where);
}

std::string safe_name_field(const json& r, const char* key, const std::string& where, const std::string& def) {
  const std::string v = str_field(r, key, where, def);
  if (v != def && !is_safe_name(v))
    bad_field(where, key, quote_excerpt(v) + " is not a name (letters, digits, '.', '_', '-'; at most " +
                              std::to_string(kMaxNameChars) + ")");
  return v;
}

void check_model(const std::string& model, const std::string& where) {
  const auto known = models::model_names();
  if (std::find(known.begin(), known.end(), model) == known.end())
    bad_field(where, "model", quote_excerpt(model) + " is not a model this ringbench knows");
}

void check_transport(const std::string& t, const std::string& where) {
  if (t != "none" && !find_backend(t))
    bad_field(where, "transport", quote_excerpt(t) + " is not a transport this ringbench knows");
}

void check_policy(const std::string& policy, const std::string& where) {
  if (policy.empty()) return;
  try {
    vgpu::parse_policy(policy);
  } catch (const std::exception&) {
    bad_field(where, "policy", quote_excerpt(policy) + " is not a scheduler policy");
  }
}

double double_in(const json& r, const char* key, double lo, double hi, const std::string& where) {
  const auto it = r.find(key);
  if (it == r.end() || !it->is_number()) bad_field(where, key, "missing or not a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    bad_field(where, key, number_text(v) + " is out of range (" + number_text(lo) + " to " + number_text(hi) + ")");
  return v;
}

void read_remote(const json& r, const std::string& where, PointCoords& c) {
  c.setup = required_str(r, "setup", where);
  if (std::find(kRemoteSetups.begin(), kRemoteSetups.end(), c.setup) == kRemoteSetups.end())
    bad_field(where, "setup", quote_excerpt(c.setup) + " is none of local_device, loopback, partial, link");
  c.clients = int_in(r, "clients", 0, kMaxVms, where);
  c.link_gbps = double_in(r, "link_gbps", 0, kMaxLinkGbps, where);
  c.latency_us = double_in(r, "latency_us", 0, kMaxLatencyUs, where);
}

}  // namespace

bool is_safe_name(const std::string& s) {
  if (s.empty() || s.size() > kMaxNameChars || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
  });
}

const char* kind_name(PointKind k) { return name_of(kKindNames, k, "?"); }

void PointCoords::write(json& r) const {
  r.update({{"kind", kind_name(kind)}, {"nodes", nodes}, {"transport", transport}, {"profile", profile}});
  if (has_model()) r.update({{"model", model}, {"batch", batch}, {"image_size", image_size}});
  if (shared()) r.update({{"policy", policy}, {"vms", vms}});
  if (kind == PointKind::migrate) r.update({{"method", method}, {"framebuffer", framebuffer}});
  if (kind == PointKind::remote)
    r.update({{"setup", setup}, {"clients", clients}, {"link_gbps", link_gbps}, {"latency_us", latency_us}});
  for (size_t i : axes_of(kind)) r[sweep_axes()[i].key] = axis_json(sweep_axes()[i], axes[i]);
}

PointCoords PointCoords::read(const json& r, const std::string& where) {
  PointCoords c;
  c.kind = parse_kind(required_str(r, "kind", where), where);
  c.nodes = int_in(r, "nodes", 1, kMaxNodes, where);
  if (c.has_model()) {
    c.model = required_str(r, "model", where);
    check_model(c.model, where);
    c.batch = int_in(r, "batch", 1, kMaxBatch, where);
    c.image_size = int_in(r, "image_size", 0, kMaxImageSize, where, 0);
  }
  if (c.kind == PointKind::share || c.kind == PointKind::infer) {  // infer: only a shared point has them
    c.policy = str_field(r, "policy", where, "");
    check_policy(c.policy, where);
    c.vms = int_in(r, "vms", 0, kMaxVms, where, 0);
  }
  if (c.kind == PointKind::migrate) {
    c.method = required_str(r, "method", where);
    if (c.method != "precopy" && c.method != "stopcopy")
      bad_field(where, "method", quote_excerpt(c.method) + " is neither precopy nor stopcopy");
    c.framebuffer = safe_name_field(r, "framebuffer", where, "");
  }
  if (c.kind == PointKind::remote) read_remote(r, where, c);
  c.transport = str_field(r, "transport", where, "none");
  check_transport(c.transport, where);
  c.profile = safe_name_field(r, "profile", where, "none");
  for (size_t i : axes_of(c.kind)) {  // records from before an axis hold its default
    const Axis& a = sweep_axes()[i];
    if (r.contains(a.key)) c.axes[i] = axis_from_json(a, r[a.key], where);
  }
  return c;
}

}  // namespace ringbench
