// The scenarios read back from `ringbench infer`'s JSON, for `vgpu share -- infer` and the report:
// "server" (a peak search's {found, peak_qps, upper_qps, tries: [{qps, result}]}, or {runs:
// [result]} at one rate) and "offline" ([{batch, samples_per_s, ...}]).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

namespace ringbench::infer {

// The run the scenario's figure comes from: the search's try at its peak (null when no rate met
// the bound), or the first run at one rate.
inline const nlohmann::json* server_headline_run(const nlohmann::json& server) {
  if (!server.is_object()) return nullptr;
  if (const auto tries = server.find("tries"); tries != server.end() && tries->is_array()) {
    const auto peak = server.find("peak_qps");
    if (!server.value("found", false) || peak == server.end()) return nullptr;
    for (const auto& t : *tries)
      if (t.value("qps", -1.0) == peak->get<double>() && t.contains("result")) return &t["result"];
    return nullptr;
  }
  if (const auto runs = server.find("runs"); runs != server.end() && runs->is_array() && !runs->empty())
    return &(*runs)[0];
  return nullptr;
}

// The QPS at the latency bound: the search's peak rate, or the one rate's completed QPS where
// that run met the bound; none otherwise.
inline std::optional<double> qps_at_bound(const nlohmann::json& server) {
  const nlohmann::json* run = server_headline_run(server);
  if (!run) return std::nullopt;
  if (server.contains("tries")) return server["peak_qps"].get<double>();
  if (!run->value("bound_met", false)) return std::nullopt;
  return run->value("completed_qps", 0.0);
}

// The Offline run at the largest batch of an infer document (or of one VM of it), or null.
inline const nlohmann::json* largest_offline_run(const nlohmann::json& doc) {
  const nlohmann::json* best = nullptr;
  if (doc.is_object() && doc.contains("offline") && doc["offline"].is_array())
    for (const auto& row : doc["offline"])
      if (row.is_object() && (!best || row.value("batch", 0) >= best->value("batch", 0))) best = &row;
  return best;
}

}  // namespace ringbench::infer
