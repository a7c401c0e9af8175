// Migrate points' runs from their records, and the stun-time model fitted to them.
#include "runner/report/migrate_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <tuple>

#include "base/bytes.h"
#include "runner/analysis/format.h"
#include "runner/analysis/stats.h"
#include "runner/record/json_fields.h"

namespace ringbench::report {
namespace {

int method_rank(const std::string& method) { return method == "precopy" ? 0 : method == "stopcopy" ? 1 : 2; }

// Rank 0's per-step times of the measured steps (empty when the record lacks them).
std::vector<double> rank0_steps(const Record& r) {
  const json* ranks = find_at(r.j, "/migrate/ranks");
  if (!ranks || !ranks->is_array()) return {};
  for (const auto& rk : *ranks) {
    if (!rk.is_object() || int_or(rk, "rank", -1) != 0 || !rk.contains("step_s") || !rk["step_s"].is_array()) continue;
    std::vector<double> steps;
    for (const auto& s : rk["step_s"]) {
      if (!s.is_number() || !(s.get<double>() > 0)) return {};
      steps.push_back(s.get<double>());
    }
    return steps;
  }
  return {};
}

// The stalled step: the slowest from the migration's start on (the stun's wait is part of it).
std::optional<StunStep> stun_step(const Point& p, const Record& r) {
  const std::vector<double> steps = rank0_steps(r);
  const auto warmup = number_at(r.j, "/migrate/meta/warmup");
  const auto at = number_at(r.j, "/migrate_at");
  if (steps.size() < 2 || !warmup || !at) return std::nullopt;
  const long start = std::lround(*at - *warmup);
  if (start < 0 || start >= long(steps.size())) return std::nullopt;
  size_t stall = size_t(start);
  for (size_t i = stall; i < steps.size(); ++i)
    if (steps[i] > steps[stall]) stall = i;
  const double images = double(p.nodes) * double(p.batch);
  std::vector<double> others;
  for (size_t i = 0; i < steps.size(); ++i)
    if (i != stall) others.push_back(images / steps[i]);
  StunStep d;
  d.steps_before = int(stall - size_t(start));
  d.step = int(std::lround(*warmup)) + int(stall) + 1;
  d.img_s = images / steps[stall];
  d.others_img_s = median(others);
  return d;
}

double number_or_0(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

// The configured size of a point, where its runs do not say.
double configured_bytes(const Point& p) {
  if (!p.framebuffer.empty()) {
    try {
      return double(parse_bytes(p.framebuffer));
    } catch (const std::exception&) {
    }
  }
  const auto fb = framebuffer_of(p);
  return fb ? *fb * kMiB : 0;
}

}  // namespace

std::vector<const MigrationRun*> MigrationRow::moved() const {
  std::vector<const MigrationRun*> v;
  for (const auto& r : runs)
    if (r.moved) v.push_back(&r);
  return v;
}

std::vector<const MigrationRun*> MigrationRow::modelled() const {
  std::vector<const MigrationRun*> v;
  for (const auto& r : runs)
    if (r.moved && !r.forced) v.push_back(&r);
  return v;
}

MigrationRun migration_run(const Point& p, const Record& r) {
  MigrationRun m;
  m.repeat = r.repeat;
  const json* mj = find_at(r.j, "/migrate/migration");
  if (!mj || !mj->is_object()) return m;
  m.recorded = true;
  m.moved = bool_or(*mj, "moved", false);
  m.forced = bool_or(*mj, "forced_at_last_step", false);
  m.error = str_or(*mj, "error", "");
  m.framebuffer_bytes = number_or_0(*mj, "framebuffer_bytes");
  m.stun_s = number_or_0(*mj, "stun_s");
  m.stun_bytes = number_or_0(*mj, "stun_bytes");
  m.precopy_rounds = number_or_0(*mj, "precopy_rounds");
  m.precopy_bytes = number_or_0(*mj, "precopy_bytes");
  m.total_s = number_or_0(*mj, "total_s");
  m.ring_stall_s = number_or_0(*mj, "ring_stall_s");
  m.dip = stun_step(p, r);
  return m;
}

std::vector<MigrationRow> migration_rows(const std::vector<const Point*>& pts) {
  std::vector<MigrationRow> rows;
  for (const Point* p : pts) {
    MigrationRow row;
    row.point = p;
    for (const Record* r : p->ok()) row.runs.push_back(migration_run(*p, *r));
    for (const auto& run : row.runs)
      if (row.framebuffer_bytes == 0) row.framebuffer_bytes = run.framebuffer_bytes;
    if (row.framebuffer_bytes == 0) row.framebuffer_bytes = configured_bytes(*p);
    rows.push_back(std::move(row));
  }
  const auto key = [](const MigrationRow& r) {
    return std::tuple(method_rank(r.point->method), r.point->method, r.framebuffer_bytes, r.point->profile, r.point->id);
  };
  std::sort(rows.begin(), rows.end(), [&](const MigrationRow& a, const MigrationRow& b) { return key(a) < key(b); });
  return rows;
}

std::optional<StunFit> fit_stun(const std::vector<std::pair<double, double>>& xy) {
  const auto line = fit_line(xy);
  if (!line) return std::nullopt;
  StunFit f;
  f.s_per_byte = line->slope;
  f.t0_s = line->intercept;
  f.r2 = line->r2;
  f.runs = line->points;
  f.sizes = line->distinct_x;
  return f;
}

std::optional<double> MigrationModel::precopy_model_s() const {
  if (!stopcopy || !(stopcopy->s_per_byte > 0) || precopy_stun_bytes.empty()) return std::nullopt;
  return stopcopy->at(median(precopy_stun_bytes));
}

std::optional<double> MigrationModel::predict(const std::string& method, double framebuffer_bytes) const {
  if (method == "stopcopy")
    return stopcopy && stopcopy->s_per_byte > 0 ? std::optional<double>(stopcopy->at(framebuffer_bytes)) : std::nullopt;
  if (method != "precopy") return std::nullopt;
  if (const auto m = precopy_model_s()) return m;
  return precopy_stun_s.empty() ? std::nullopt : std::optional<double>(median(precopy_stun_s));
}

std::optional<double> MigrationModel::precopy_at_line_rate_s(double line_bits_s) const {
  if (!stopcopy || precopy_stun_bytes.empty() || !(line_bits_s > 0)) return std::nullopt;
  return stopcopy->t0_s + median(precopy_stun_bytes) * 8 / line_bits_s;
}

std::optional<double> tc_rate_bits(const std::string& rate) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(rate, &end);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string unit = rate.substr(end);
  const double scale = unit == "bit" ? 1 : unit == "kbit" ? 1e3 : unit == "mbit" ? 1e6 : unit == "gbit" ? 1e9 : 0;
  if (!(scale > 0) || !(v > 0) || !std::isdigit(static_cast<unsigned char>(rate[0]))) return std::nullopt;
  return v * scale;
}

MigrationModel migration_model(const std::vector<MigrationRow>& rows) {
  MigrationModel m;
  std::vector<std::pair<double, double>> stopcopy;
  for (const auto& row : rows)
    for (const MigrationRun* r : row.modelled()) {
      if (row.point->method == "stopcopy") stopcopy.emplace_back(r->framebuffer_bytes, r->stun_s);
      if (row.point->method == "precopy") {
        m.precopy_stun_bytes.push_back(r->stun_bytes);
        m.precopy_stun_s.push_back(r->stun_s);
      }
    }
  m.stopcopy = fit_stun(stopcopy);
  return m;
}

std::string fb_size_text(double bytes) {
  const bool gib = bytes >= kGiB;
  const double v = bytes / (gib ? kGiB : kMiB);
  return fixed(v, v == std::floor(v) ? 0 : 1) + (gib ? " GiB" : " MiB");
}

std::string method_text(const std::string& method) {
  return method == "precopy" ? "pre-copy" : method == "stopcopy" ? "stop-and-copy" : method;
}

}  // namespace ringbench::report
