// raw.jsonl's records, read and checked: one Record per (point, repeat) line (the format is in
// runner/report/report.h).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runner/record/point.h"

namespace ringbench::report {

using json = nlohmann::json;

struct Record : PointCoords {
  json j;
  std::string point, status, error, started_at;
  int repeat = 0;
  std::pair<int, size_t> order;  // (seq, position in raw.jsonl): the order the sweep ran it
};

const json* find_at(const json& j, const char* pointer);
std::optional<double> number_at(const json& j, const char* pointer);

// Every record of raw.jsonl, in file order. raw.jsonl is untrusted (results directories are
// shared and downloaded): a non-regular or oversized file is refused, and every record is
// checked field by field (known kinds, models, transports, policies; safe names; coordinates in
// their bounds; measured numbers non-negative numbers): a bad one is an Error naming its line
// and field. An unparsable last line is what a sweep killed mid-write leaves: it is dropped
// with a warning; anywhere else it is an error.
std::vector<Record> read_records(const std::string& run_dir);

}  // namespace ringbench::report
