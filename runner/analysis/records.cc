// Reading raw.jsonl: each line checked and turned into a Record.
#include "runner/analysis/records.h"

#include <filesystem>
#include <cstring>
#include <iostream>
#include <set>
#include <sstream>

#include "base/errors.h"
#include "base/input_file.h"
#include "runner/record/json_fields.h"

namespace ringbench::report {
namespace {

namespace fs = std::filesystem;

// The keys whose values are measured numbers, wherever they sit in a record: times (_s, _ns,
// _us, _ms), sizes (_mib, _bytes), rates and their statistics. Each must hold a non-negative
// number, null (not measured), or lists and objects of those; never a string.
bool is_measured_key(const std::string& k) {
  static const char* const kSuffixes[] = {"_s", "_ns", "_us", "_ms", "_mib", "_bytes", "_qps", "_gbps"};
  static const std::set<std::string> kNames = {"qps", "mean", "median", "ci95", "min", "max", "bytes", "busbw",
                                               "algbw", "mean_over_ranks", "cpus_busy_per_rank", "cpus_busy",
                                               "pipeline_cpus_per_rank", "pipeline_cpus"};
  for (const char* suffix : kSuffixes) {
    const size_t n = std::strlen(suffix);
    if (k.size() > n && k.compare(k.size() - n, n, suffix) == 0) return true;
  }
  return kNames.count(k) > 0;
}

void check_measured(const json& v, const std::string& where, const std::string& field) {
  if (v.is_null()) return;
  if (v.is_number()) {
    if (v.get<double>() < 0) throw Error(where + ": \"" + field + "\": " + v.dump() + " is negative");
    return;
  }
  if (!v.is_array() && !v.is_object())
    throw Error(where + ": \"" + field + "\": " + quote_excerpt(v.dump()) + " is not a number");
  if (v.is_array())
    for (size_t i = 0; i < v.size(); ++i) check_measured(v[i], where, field + "/" + std::to_string(i));
  else
    for (const auto& [k, x] : v.items()) check_measured(x, where, field + "/" + k);
}

// Every measured number in the record, found by its key (see is_measured_key). A transport's
// options as printed ("path": {"spin_us": "200"}) are text, not measurements.
void check_numbers(const json& v, const std::string& where, const std::string& at) {
  if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) check_numbers(v[i], where, at + "/" + std::to_string(i));
    return;
  }
  if (!v.is_object()) return;
  for (const auto& [k, x] : v.items()) {
    const std::string field = at.empty() ? k : at + "/" + k;
    if (k == "path") continue;
    if (is_measured_key(k))
      check_measured(x, where, field);
    else
      check_numbers(x, where, field);
  }
}

Record to_record(const json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + " is not a JSON object");
  if (!j.contains("schema")) throw Error(where + ": \"schema\" is missing: not a ringbench record");
  if (j["schema"] != 1)
    throw Error(where + ": \"schema\": " + quote_excerpt(j["schema"].dump()) +
                " is not the one this ringbench reads (1): report it with the ringbench that ran it");
  Record r;
  r.j = j;
  r.point = required_str(j, "point", where);
  if (r.point.empty() || r.point.size() > 512 ||
      r.point.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/") != std::string::npos)
    throw Error(where + ": \"point\": " + quote_excerpt(r.point) + " is not a point id");
  r.repeat = required_int(j, "repeat", where);
  if (r.repeat < 1 || r.repeat > int(kMaxPoints))
    throw Error(where + ": \"repeat\": " + std::to_string(r.repeat) + " is out of range (1 to " +
                std::to_string(kMaxPoints) + ")");
  if (j.contains("seq") && !(j["seq"].is_number_integer() && j["seq"].get<long long>() >= 0))
    throw Error(where + ": \"seq\": " + quote_excerpt(j["seq"].dump()) + " is not a point's sequence number");
  static_cast<PointCoords&>(r) = PointCoords::read(j, where);
  r.status = required_str(j, "status", where);
  if (r.status != "ok" && r.status != "failed" && r.status != "skipped" &&
      r.status != "does_not_fit")
    throw Error(where + ": \"status\": " + quote_excerpt(r.status) +
                " is none of ok, failed, skipped, does_not_fit");
  check_numbers(j, where, "");
  r.error = str_or(j, "error", "");
  r.started_at = str_or(j, "started_at", "");
  if (r.status == "ok" && r.kind == PointKind::train && !number_at(j, "/train/summary/total_img_s/mean"))
    throw Error(where + ": status ok but train.summary.total_img_s.mean is missing");
  if (r.status == "ok" && r.kind == PointKind::share && !number_at(j, "/share/summary/total_img_s/mean"))
    throw Error(where + ": status ok but share.summary.total_img_s.mean is missing");
  if (r.status == "ok" && r.kind == PointKind::migrate && !number_at(j, "/migrate/summary/total_img_s/mean"))
    throw Error(where + ": status ok but migrate.summary.total_img_s.mean is missing");
  if (r.status == "ok" && r.kind == PointKind::remote && !number_at(j, "/remote/summary/total_img_s/mean"))
    throw Error(where + ": status ok but remote.summary.total_img_s.mean is missing");
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
  if (!fs::exists(fs::symlink_status(path)))
    throw Error(path + " not found: is " + run_dir + " a sweep's results directory?");
  std::istringstream in(read_input_file(path, "the sweep's records", kMaxResultsBytes));
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
      // nlohmann's message quotes what it last read: the file's text, which an error never shows.
      const auto* pe = dynamic_cast<const json::parse_error*>(&e);
      if (i + 1 < last)
        throw Error(where + " is not valid JSON" + (pe ? " (at byte " + std::to_string(pe->byte) + ")" : std::string()));
      std::cerr << "ringbench report: warning: " << where
                << " is incomplete (the sweep was interrupted while writing it): ignored\n";
      continue;
    }
    // A results directory is untrusted input (it is shared and downloaded): a record of the
    // wrong shape is an error naming its line and field, never a row of nonsense.
    records.push_back(to_record(j, where));
    records.back().order = {int_or(j, "seq", 0), i};
  }
  if (records.empty()) throw Error(path + " has no records: the sweep finished no point");
  return records;
}

}  // namespace ringbench::report
