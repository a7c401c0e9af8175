// Sweep axes: the options a sweep can list so that each value is a point of its own (train's
// precision, compression, fusion_mb, ...). Each axis is ONE declaration in axes.cc's table; from
// it alone come its config key (a value or a list), its values' check, the points' expansion and
// ids, raw.jsonl's field (written, and read back validated), the command's flag, summary.csv's
// column and the report's grouping and labels. docs/tuning.md says how to add one.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ringbench {

enum class PointKind;

enum class AxisType {
  name,    // one of names()
  number,  // a decimal in [min, max] (an integer one when `integer`)
  bytes,   // a byte count ("256K", "4M") in [min, max] bytes
  flag,    // true or false (default false): the command's option given alone when true
};

struct Axis {
  PointKind kind;              // the points it multiplies: the section its key sits in (train:)
  std::string key;             // config key, raw.jsonl field and summary.csv column: "compression"
  std::string config_key{};    // the config's key where it is not `key` (a list's plural: "ops")
  // The point's command's option: "--compression"; "" where the value names the command itself
  // (the collectives' op: `ringbench allgather`).
  std::string flag;
  AxisType type = AxisType::name;
  std::string default_value;   // the command's default; also what records from before the axis held
  std::string id_prefix{};     // before the value in a point's id: "wire-" gives .../wire-fp16/...
  std::string label{};         // before the value in the report's labels: "wire " ("" for precision)
  std::vector<std::string> (*names)() = nullptr;  // AxisType::name: the allowed values
  double min = 0, max = 0;     // number, bytes: bounds
  bool integer = false;        // number: whole numbers only
  // Matters only between ranks: N=1 runs once, at the default (one rank sends nothing), and
  // points that differ only in such axes share that N=1 baseline.
  bool communication = false;
  // `ringbench tune`, `train --autotune` and a sweep's `tuned: true` choose it: the step model
  // prices it (runner/tune/tune_model.h).
  bool tuned = false;
  // A second section the axis sits in, with the same key, flag and values (hierarchical: train's
  // and collectives'); none for most.
  std::optional<PointKind> also{};

  bool in(PointKind k) const { return kind == k || also == k; }
  const std::string& config() const { return config_key.empty() ? key : config_key; }
};

// Every axis, in declaration order (the order of loops, ids, columns and sorting).
const std::vector<Axis>& sweep_axes();
// The axes of one point kind (those that also sit in its section included), as indexes into sweep_axes().
std::vector<size_t> axes_of(PointKind kind);
// The index of `key` in sweep_axes(); throws std::logic_error for an unknown key (a typo in code).
size_t axis_index(const std::string& key);
// Every axis at its default: a point's values before the sweep sets them.
std::vector<std::string> axis_defaults();

// `v` in its canonical text ("0.25", "4M", "fp16"), or nullopt with `why` set when it is not a
// value of the axis.
std::optional<std::string> axis_canonical(const Axis& a, const std::string& v, std::string& why);
// The JSON form of a value in raw.jsonl (numbers as numbers) and back (validated; throws Error
// naming `where` and the field).
nlohmann::json axis_json(const Axis& a, const std::string& value);
std::string axis_from_json(const Axis& a, const nlohmann::json& v, const std::string& where);
// How a point's value reads in the report ("wire fp16"; a flag: its label alone) or, with
// `as_flag`, on a command line ("--compression fp16"; a flag: "--hierarchical").
std::string axis_value_label(const Axis& a, const std::string& value, bool as_flag);
// A key that sorts values in their natural order (numbers and byte counts by size).
std::pair<double, std::string> axis_sort_key(const Axis& a, const std::string& value);

}  // namespace ringbench
