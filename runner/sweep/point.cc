#include "runner/sweep/point.h"

#include "base/errors.h"
#include "base/name_table.h"
#include "runner/sweep/json_fields.h"

namespace ringbench {
namespace {

using json = nlohmann::json;

constexpr EnumName<PointKind> kKindNames[] = {
    {PointKind::train, "train"}, {PointKind::collectives, "collectives"}, {PointKind::share, "share"},
    {PointKind::infer, "infer"}, {PointKind::migrate, "migrate"}};

PointKind parse_kind(const std::string& s, const std::string& where) {
  if (const auto k = parse_name(kKindNames, s)) return *k;
  throw Error(where + ": kind \"" + s + "\" is none of train, collectives, share, infer, migrate");
}

}  // namespace

const char* kind_name(PointKind k) { return name_of(kKindNames, k, "?"); }

void PointCoords::write(json& r) const {
  r.update({{"kind", kind_name(kind)}, {"nodes", nodes}, {"transport", transport}, {"profile", profile}});
  if (has_model()) r.update({{"model", model}, {"batch", batch}, {"image_size", image_size}});
  if (shared()) r.update({{"policy", policy}, {"vms", vms}});
  if (kind == PointKind::migrate) r.update({{"method", method}, {"framebuffer", framebuffer}});
}

PointCoords PointCoords::read(const json& r, const std::string& where) {
  PointCoords c;
  c.kind = parse_kind(required_str(r, "kind", where), where);
  c.nodes = required_int(r, "nodes", where);
  if (c.has_model()) {
    c.model = required_str(r, "model", where);
    c.batch = required_int(r, "batch", where);
    c.image_size = int_or(r, "image_size", 0);
  }
  if (c.kind == PointKind::share || c.kind == PointKind::infer) {  // infer: only a shared point has them
    c.policy = str_or(r, "policy", "");
    c.vms = int_or(r, "vms", 0);
  }
  if (c.kind == PointKind::migrate) {
    c.method = required_str(r, "method", where);
    c.framebuffer = str_or(r, "framebuffer", "");
  }
  c.transport = str_or(r, "transport", "none");
  c.profile = str_or(r, "profile", "none");
  return c;
}

}  // namespace ringbench
