#include "runner/sweep/point.h"

#include "base/errors.h"

namespace ringbench {
namespace {

using json = nlohmann::json;

std::string str_or(const json& j, const char* key, const std::string& def) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : def;
}

int int_or(const json& j, const char* key, int def) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int>() : def;
}

const json& required(const json& j, const char* key, bool ok(const json&), const char* what, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || !ok(*it)) throw Error(where + ": \"" + key + "\" is missing or not " + what);
  return *it;
}

bool is_string(const json& v) { return v.is_string(); }
bool is_int(const json& v) { return v.is_number_integer(); }

PointKind parse_kind(const std::string& s, const std::string& where) {
  for (PointKind k : {PointKind::train, PointKind::collectives, PointKind::share})
    if (s == kind_name(k)) return k;
  throw Error(where + ": kind \"" + s + "\" is none of train, collectives, share");
}

}  // namespace

const char* kind_name(PointKind k) {
  switch (k) {
    case PointKind::train: return "train";
    case PointKind::collectives: return "collectives";
    case PointKind::share: return "share";
  }
  return "?";
}

void PointCoords::write(json& r) const {
  r.update({{"kind", kind_name(kind)}, {"nodes", nodes}, {"transport", transport}, {"profile", profile}});
  if (has_model()) r.update({{"model", model}, {"batch", batch}, {"image_size", image_size}});
  if (kind == PointKind::share) r.update({{"policy", policy}, {"vms", vms}});
}

PointCoords PointCoords::read(const json& r, const std::string& where) {
  PointCoords c;
  c.kind = parse_kind(required(r, "kind", is_string, "a string", where).get<std::string>(), where);
  c.nodes = required(r, "nodes", is_int, "an integer", where).get<int>();
  if (c.has_model()) {
    c.model = required(r, "model", is_string, "a string", where).get<std::string>();
    c.batch = required(r, "batch", is_int, "an integer", where).get<int>();
    c.image_size = int_or(r, "image_size", 0);
  }
  if (c.kind == PointKind::share) {
    c.policy = str_or(r, "policy", "");
    c.vms = int_or(r, "vms", 0);
  }
  c.transport = str_or(r, "transport", "none");
  c.profile = str_or(r, "profile", "none");
  return c;
}

}  // namespace ringbench
