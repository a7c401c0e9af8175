// Reading raw.jsonl: each line checked and turned into a Record.
#include "runner/report/records.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "base/errors.h"
#include "runner/sweep/json_fields.h"

namespace ringbench::report {
namespace {

namespace fs = std::filesystem;

Record to_record(const json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + " is not a JSON object");
  if (int_or(j, "schema", 0) != 1)
    throw Error(where + ": schema " + (j.contains("schema") ? j["schema"].dump() : "(missing)") +
                " is not the one this ringbench reads (1): report it with the ringbench that ran it");
  Record r;
  r.j = j;
  r.point = required_str(j, "point", where);
  r.repeat = required_int(j, "repeat", where);
  static_cast<PointCoords&>(r) = PointCoords::read(j, where);
  r.status = required_str(j, "status", where);
  if (r.repeat < 1) throw Error(where + ": \"repeat\" must be >= 1");
  if (r.status != "ok" && r.status != "failed" && r.status != "skipped" &&
      r.status != "does_not_fit")
    throw Error(where + ": status \"" + r.status +
                "\" is none of ok, failed, skipped, does_not_fit");
  r.error = str_or(j, "error", "");
  r.started_at = str_or(j, "started_at", "");
  if (r.status == "ok" && r.kind == PointKind::train && !number_at(j, "/train/summary/total_img_s/mean"))
    throw Error(where + ": status ok but train.summary.total_img_s.mean is missing");
  if (r.status == "ok" && r.kind == PointKind::share && !number_at(j, "/share/summary/total_img_s/mean"))
    throw Error(where + ": status ok but share.summary.total_img_s.mean is missing");
  if (r.status == "ok" && r.kind == PointKind::migrate && !number_at(j, "/migrate/summary/total_img_s/mean"))
    throw Error(where + ": status ok but migrate.summary.total_img_s.mean is missing");
  if (r.status == "ok" && r.kind == PointKind::infer && !(find_at(j, "/infer") && j["infer"].is_object()))
    throw Error(where + ": status ok but the infer section is missing");
  if (r.status == "ok" && r.kind == PointKind::collectives &&
      !(find_at(j, "/collectives/rows") && j["collectives"]["rows"].is_array()))
    throw Error(where + ": status ok but collectives.rows is missing");
  return r;
}

bool is_blank(const std::string& s) { return s.find_first_not_of(" \t\r") == std::string::npos; }

}  // namespace

const json* find_at(const json& j, const char* pointer) {
  const json::json_pointer p(pointer);
  return j.contains(p) ? &j.at(p) : nullptr;
}

std::optional<double> number_at(const json& j, const char* pointer) {
  const json* v = find_at(j, pointer);
  return v && v->is_number() ? std::optional<double>(v->get<double>()) : std::nullopt;
}

std::vector<Record> read_records(const std::string& run_dir) {
  const std::string path = run_dir + "/raw.jsonl";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!fs::exists(path))
      throw Error(path + " not found: is " + run_dir + " a sweep's results directory?");
    throw Error("cannot read " + path + ": " + std::strerror(errno));
  }
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  size_t last = lines.size();
  while (last > 0 && is_blank(lines[last - 1])) --last;

  std::vector<Record> records;
  for (size_t i = 0; i < last; ++i) {
    if (is_blank(lines[i])) continue;
    const std::string where = path + " line " + std::to_string(i + 1);
    json j;
    try {
      j = json::parse(lines[i]);
    } catch (const json::exception& e) {  // a syntax error, or a number out of range (1e999)
      if (i + 1 < last) throw Error(where + " is not valid JSON: " + e.what());
      std::cerr << "ringbench report: warning: " << where
                << " is incomplete (the sweep was interrupted while writing it): ignored\n";
      continue;
    }
    // A record of the wrong shape (a hand edit, another tool, a newer schema) is left out
    // with its line number, so the rest of the run still reports.
    try {
      records.push_back(to_record(j, where));
    } catch (const Error& e) {
      std::cerr << "ringbench report: warning: " << e.what() << ": record left out\n";
      continue;
    }
    records.back().order = {int_or(j, "seq", 0), i};
  }
  if (records.empty()) throw Error(path + " has no records: the sweep finished no point");
  return records;
}

}  // namespace ringbench::report
