#include "runner/record/axes.h"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "base/bytes.h"
#include "base/errors.h"
#include "models/network.h"
#include "runner/backends/collective.h"
#include "runner/record/train_args.h"
#include "runner/record/point.h"
#include "runner/record/yaml_reader.h"

namespace ringbench {
namespace {

std::vector<std::string> precision_values() { return models::precision_names(); }
std::vector<std::string> compression_values() { return kCompressionNames; }
std::vector<std::string> data_values() { return kDataNames; }
std::vector<std::string> collective_values() {  // the registered ones (runner/backends/ops/)
  std::vector<std::string> v;
  for (const Collective* c : collectives()) v.push_back(c->name);
  return v;
}
std::vector<std::string> algo_values() { return {"auto", "ring", "hd", "direct", "rd"}; }  // collectives/allreduce.h

std::string decimal(double v) {
  std::ostringstream o;
  o << std::setprecision(12) << v;
  return o.str();
}

std::string bytes_text(size_t b) {
  if (b && b % (1 << 30) == 0) return std::to_string(b >> 30) + "G";
  if (b && b % (1 << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b && b % (1 << 10) == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

// The table: one entry per axis. Defaults are train's own, so a point at the default runs
// exactly what a sweep without the axis ran.
std::vector<Axis> declare_axes() {
  const TrainArgs train;
  return {
      {.kind = PointKind::train, .key = "precision", .flag = "--precision", .default_value = train.precision,
       .names = precision_values},
      {.kind = PointKind::train, .key = "compression", .flag = "--compression", .default_value = train.compression,
       .id_prefix = "wire-", .label = "wire ", .names = compression_values, .communication = true,
       .tuned = true},
      {.kind = PointKind::train, .key = "fusion_mb", .flag = "--fusion-mb", .type = AxisType::number,
       .default_value = decimal(train.fusion_mb), .id_prefix = "fusion", .label = "fusion MiB ", .min = 0,
       .max = 65536, .communication = true, .tuned = true},
      {.kind = PointKind::train, .key = "first_bucket_mb", .flag = "--first-bucket-mb", .type = AxisType::number,
       .default_value = decimal(train.first_bucket_mb), .id_prefix = "first", .label = "first bucket MiB ", .min = 0,
       .max = 65536, .communication = true, .tuned = true},
      {.kind = PointKind::train, .key = "segment", .flag = "--segment", .type = AxisType::bytes,
       .default_value = train.segment, .id_prefix = "seg", .label = "segment ", .min = 4096, .max = double(1 << 30),
       .communication = true, .tuned = true},
      {.kind = PointKind::train, .key = "sockets_per_peer", .flag = "--sockets-per-peer", .type = AxisType::number,
       .default_value = std::to_string(train.sockets_per_peer), .id_prefix = "sockets", .label = "sockets ", .min = 1,
       .max = 64, .integer = true, .communication = true},
      // What the ranks train on; jpeg and fashion-mnist read train.data_dir.
      {.kind = PointKind::train, .key = "data", .flag = "--data", .default_value = train.data, .id_prefix = "data-",
       .label = "data ", .names = data_values},
      {.kind = PointKind::train, .key = "data_threads", .flag = "--data-threads", .type = AxisType::number,
       .default_value = std::to_string(train.data_threads), .id_prefix = "dthreads", .label = "data threads ",
       .min = 1, .max = 256, .integer = true},
      // The collective a point times: `ringbench <op>` (allreduce, allgather, ...); ids name the
      // others (collectives/allgather/n4/...), and the report gives each its own table and plot.
      {.kind = PointKind::collectives, .key = "collective", .config_key = "ops", .flag = "",
       .default_value = "allreduce", .names = collective_values},
      // Our allreduce in two levels on a cluster of several ranks per node: the collectives' (ids
      // collectives/hier/...) and train's gradients (ids train/.../hier/...).
      {.kind = PointKind::collectives, .key = "hierarchical", .flag = "--hierarchical", .type = AxisType::flag,
       .default_value = "false", .id_prefix = "hier", .label = "hierarchical", .communication = true,
       .also = PointKind::train},
      // The hierarchical allreduce's pipeline chunk (0: the levels one after the other); a flat
      // point ignores it, so list it in settings beside hierarchical: true.
      {.kind = PointKind::collectives, .key = "hier_chunk", .flag = "--hier-chunk", .type = AxisType::bytes,
       .default_value = train.hier_chunk, .id_prefix = "chunk", .label = "chunk ", .min = 0, .max = double(1 << 30),
       .communication = true, .also = PointKind::train},
      // Our allreduce's algorithm (auto: the built-in rule); measured alone, each gets a fit of
      // its own at every size, from which `predict --algo-table` chooses.
      {.kind = PointKind::collectives, .key = "algo", .flag = "--algo", .default_value = "auto", .id_prefix = "algo-",
       .label = "algo ", .names = algo_values, .communication = true},
  };
}

double axis_number(const Axis& a, const std::string& v) {
  return a.type == AxisType::bytes ? double(parse_bytes(v)) : std::stod(v);
}

}  // namespace

const std::vector<Axis>& sweep_axes() {
  static const std::vector<Axis> axes = declare_axes();
  return axes;
}

std::vector<size_t> axes_of(PointKind kind) {
  std::vector<size_t> v;
  for (size_t i = 0; i < sweep_axes().size(); ++i)
    if (sweep_axes()[i].in(kind)) v.push_back(i);
  return v;
}

size_t axis_index(const std::string& key) {
  for (size_t i = 0; i < sweep_axes().size(); ++i)
    if (sweep_axes()[i].key == key) return i;
  throw std::logic_error("no sweep axis '" + key + "'");
}

std::vector<std::string> axis_defaults() {
  std::vector<std::string> v;
  for (const auto& a : sweep_axes()) v.push_back(a.default_value);
  return v;
}

std::optional<std::string> axis_canonical(const Axis& a, const std::string& v, std::string& why) {
  if (a.type == AxisType::flag) {
    if (v == "true" || v == "false") return v;
    why = quote_excerpt(v) + " is not true or false";
    return std::nullopt;
  }
  if (a.type == AxisType::name) {
    const auto names = a.names();
    if (std::find(names.begin(), names.end(), v) != names.end()) return v;
    why = quote_excerpt(v) + " is not one of: " + join_names(names);
    return std::nullopt;
  }
  double x = 0;
  try {
    size_t used = 0;
    x = a.type == AxisType::bytes ? double(parse_bytes(v)) : std::stod(v, &used);
    if (a.type == AxisType::number && used != v.size()) throw Error("trailing text");
  } catch (const std::exception&) {
    why = quote_excerpt(v) + (a.type == AxisType::bytes ? " is not a byte count (e.g. 256K, 4M)" : " is not a number");
    return std::nullopt;
  }
  const bool whole = !a.integer || x == std::floor(x);
  if (!(x >= a.min && x <= a.max) || !whole) {
    why = "must be " + std::string(a.integer ? "a whole number " : "") + "from " +
          (a.type == AxisType::bytes ? bytes_text(size_t(a.min)) : number_text(a.min)) + " to " +
          (a.type == AxisType::bytes ? bytes_text(size_t(a.max)) : number_text(a.max)) + " (got " + quote_excerpt(v) + ")";
    return std::nullopt;
  }
  return a.type == AxisType::bytes ? bytes_text(size_t(x)) : decimal(x);
}

nlohmann::json axis_json(const Axis& a, const std::string& value) {
  if (a.type == AxisType::flag) return value == "true";
  if (a.type != AxisType::number) return value;
  if (a.integer) return static_cast<long long>(std::stod(value));
  return std::stod(value);
}

std::string axis_from_json(const Axis& a, const nlohmann::json& v, const std::string& where) {
  if (a.type == AxisType::flag) {
    if (!v.is_boolean()) throw Error(where + ": \"" + a.key + "\": must be true or false");
    return v.get<bool>() ? "true" : "false";
  }
  const bool number = a.type == AxisType::number;
  if (number ? !v.is_number() : !v.is_string())
    throw Error(where + ": \"" + a.key + "\": must be a " + (number ? "number" : "string"));
  std::string why;
  const auto c = axis_canonical(a, number ? decimal(v.get<double>()) : v.get<std::string>(), why);
  if (!c) throw Error(where + ": \"" + a.key + "\": " + why);
  return *c;
}

std::pair<double, std::string> axis_sort_key(const Axis& a, const std::string& value) {
  return {a.type == AxisType::name || a.type == AxisType::flag ? 0.0 : axis_number(a, value), value};
}

std::string axis_value_label(const Axis& a, const std::string& value, bool as_flag) {
  if (a.type == AxisType::flag) return value == "true" ? (as_flag ? a.flag : a.label) : "not " + a.label;
  return (as_flag ? a.flag + " " : a.label) + value;
}

}  // namespace ringbench
