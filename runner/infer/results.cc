// The scenarios' results as JSON and as one line of text in MLPerf's words.
#include <string>

#include "runner/infer/loadgen.h"
#include "runner/infer/text_format.h"

namespace ringbench::infer {

nlohmann::json SingleStreamResult::to_json() const {
  return {{"scenario", "SingleStream"}, {"queries", queries},   {"duration_s", duration_s},
          {"elapsed_s", elapsed_s},     {"qps", qps},           {"latency", latency.to_json()},
          {"validity", validity.to_json()}};
}

std::string SingleStreamResult::text() const {
  return "SingleStream: p90 " + ms(latency.p90_s) + " (p50 " + ms(latency.p50_s) + ", p99 " + ms(latency.p99_s) +
         "), " + fixed(qps, 1) + " QPS, " + std::to_string(queries) + " queries in " + shortest(elapsed_s) +
         " s: " + validity.text();
}

nlohmann::json OfflineResult::to_json() const {
  return {{"scenario", "Offline"},  {"batch", batch},         {"samples", samples},
          {"batches", batches},     {"duration_s", duration_s}, {"samples_per_s", samples_per_s},
          {"validity", validity.to_json()}};
}

std::string OfflineResult::text() const {
  return "Offline: batch " + std::to_string(batch) + ", " + fixed(samples_per_s, 1) + " samples/s (" +
         std::to_string(samples) + " samples in " + shortest(duration_s) + " s): " + validity.text();
}

nlohmann::json OfflineSweep::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const OfflineResult& p : points) out.push_back(p.to_json());
  return out;
}

std::string OfflineSweep::text() const {
  std::string out;
  for (const OfflineResult& p : points) out += p.text() + "\n";
  return out;
}

nlohmann::json ServerResult::to_json() const {
  return {{"scenario", "Server"},
          {"target_qps", target_qps},
          {"latency_bound_s", latency_bound_s},
          {"latency_percentile", latency_percentile},
          {"max_batch", max_batch},
          {"batch_timeout_s", batch_timeout_s},
          {"queries", queries},
          {"served", served},
          {"unserved", unserved},
          {"batches", batches},
          {"duration_s", duration_s},
          {"scheduled_qps", scheduled_qps},
          {"completed_qps", completed_qps},
          {"mean_batch", mean_batch},
          {"latency", latency.to_json()},
          {"tail_latency_s", tail_latency_s},
          {"over_bound", over_bound},
          {"bound_met", bound_met},
          {"validity", validity.to_json()}};
}

std::string ServerResult::text() const {
  return "Server: " + fixed(target_qps, 1) + " QPS target (" + fixed(scheduled_qps, 1) + " scheduled, " +
         std::to_string(queries) + " queries, mean batch " + fixed(mean_batch, 2) + "), " +
         percentile_label(latency_percentile) + " " + ms(tail_latency_s) + (bound_met ? " <= " : " > ") +
         shortest(latency_bound_s * 1e3) + " ms bound: " + validity.text();
}

nlohmann::json QpsSearch::to_json() const {
  nlohmann::json tried = nlohmann::json::array();
  for (const QpsTry& t : tries) tried.push_back({{"qps", t.qps}, {"result", t.result.to_json()}});
  return {{"found", found}, {"peak_qps", peak_qps}, {"upper_qps", upper_qps}, {"tries", tried}};
}

std::string QpsSearch::text() const {
  std::string out;
  for (const QpsTry& t : tries) out += "  " + t.result.text() + "\n";
  if (!found) return out + "Server peak: no rate met the bound in " + std::to_string(tries.size()) + " runs\n";
  out += "Server peak: " + fixed(peak_qps, 1) + " QPS (" + percentile_label(peak()->latency_percentile) + " " +
         ms(peak()->tail_latency_s) + " <= " + shortest(peak()->latency_bound_s * 1e3) + " ms bound)";
  out += upper_qps > 0 ? ", " + fixed(upper_qps, 1) + " QPS missed it" : ", no rate tried missed it";
  return out + ", " + std::to_string(tries.size()) + " runs\n";
}

}  // namespace ringbench::infer
