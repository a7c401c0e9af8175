// A sweep section's axis lists (train: {precision: [fp32, bf16], fusion_mb: [1, 4]}): read from
// the config, written back to config.yaml, and multiplied out into points' values, ids and
// command-line flags. Every function works on sweep_axes() alone: a new axis needs nothing here.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runner/record/axes.h"

namespace ringbench {

class YamlReader;

// For each axis of sweep_axes(), the values a section's points take: its default alone where the
// section does not list the axis.
struct AxisLists {
  std::vector<std::vector<std::string>> values = one_default_each();
  // `settings:` chosen combinations (ringbench tune's candidates): when not empty, the points take
  // exactly these (every axis's value, in sweep_axes() order) instead of the lists' product.
  std::vector<std::vector<std::string>> settings;
  const std::vector<std::string>& of(const std::string& key) const { return values[axis_index(key)]; }
  static std::vector<std::vector<std::string>> one_default_each();
};

// Whether some point of the lists (or of their settings) takes `value` on the axis at `axis`.
bool uses_value(const AxisLists& lists, size_t axis, const std::string& value);

// The config keys of `kind`'s axes (for YamlReader::only).
std::vector<std::string> axis_keys(PointKind kind);
// The same and "settings" (none when the kind has no axes).
std::vector<std::string> axis_keys_and_settings(PointKind kind);
// Reads `kind`'s axes from the section: each a value or a non-empty list of distinct values; and
// `settings:`, a list of mappings of axis values (an axis a setting does not name: its list's
// first value).
AxisLists read_axis_lists(const YamlReader& r, PointKind kind);
// Adds `kind`'s axes to the section's JSON (config.yaml): names as lists, numbers and byte counts
// as a scalar when there is one value.
void write_axis_lists(const AxisLists& lists, PointKind kind, nlohmann::json& section);
// Every combination of `kind`'s values, the first axis outermost (or the settings, in order).
void for_each_axis_combo(const AxisLists& lists, PointKind kind,
                         const std::function<void(const std::vector<std::string>&)>& visit);
// The combination as one rank runs it, or nullopt where that repeats another: one rank sends
// nothing, so it runs only the first listed value of each communication axis, recorded as the
// default; with settings, only the first setting, as written (tune's probe: fusion_mb 0).
std::optional<std::vector<std::string>> at_one_rank(const AxisLists& lists, PointKind kind,
                                                    std::vector<std::string> values);
// The point id's part for the values: "/bf16/wire-fp16/fusion4" (axes at their default add nothing).
std::string axes_id(PointKind kind, const std::vector<std::string>& values);
// The command's flags for the values off their default: {"--fusion-mb", "4"} (an axis that names
// the command itself, the collectives' op, adds none: the caller runs the command it names).
std::vector<std::string> axes_args(PointKind kind, const std::vector<std::string>& values);

}  // namespace ringbench
