#include "runner/predict/predict_cmd.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "base/errors.h"
#include "base/output_file.h"
#include "runner/predict/algo_choice.h"
#include "runner/predict/hierarchical.h"
#include "runner/predict/md_model_check.h"
#include "runner/predict/md_predictions.h"
#include "runner/predict/remote_whatif.h"
#include "runner/predict/whatif.h"
#include "runner/analysis/run.h"
#include "runner/record/yaml_reader.h"

namespace ringbench {

using nlohmann::json;
using namespace predict;

namespace {

json fit_json(const TransportFit& f) {
  json residuals = json::array();
  for (const auto& r : f.fit.residuals)
    residuals.push_back({{"nodes", r.nodes}, {"bytes", r.bytes}, {"measured_s", r.measured_s},
                         {"fitted_s", r.fitted_s}, {"error", r.error()}});
  return {{"transport", f.transport}, {"nodes", f.nodes ? json(f.nodes) : json("all")}, {"algo", f.fit.algo},
          {"alpha_s", f.fit.alpha_s}, {"beta_s_per_byte", f.fit.beta_s}, {"r2", f.fit.r2},
          {"min_bytes", f.fit.min_bytes}, {"max_bytes", f.fit.max_bytes}, {"residuals", residuals}};
}

json predictions_json(const std::vector<ModelPrediction>& predictions) {
  json out = json::array();
  for (const auto& mp : predictions) {
    json links = json::array();
    for (const auto& c : mp.links) {
      json curve = json::array();
      for (const auto& x : c.curve)
        curve.push_back({{"nodes", x.nodes}, {"ring_step_s", x.ring_step_s}, {"ring_efficiency", x.ring_efficiency},
                         {"hd_step_s", x.hd_step_s}, {"hd_efficiency", x.hd_efficiency},
                         {"ring_latency_share", x.latency_share}});
      json measured = json::object();
      for (const auto& [n, e] : c.measured_efficiency) measured[std::to_string(n)] = e;
      links.push_back({{"transport", c.link.name}, {"alpha_s", c.link.alpha_s}, {"beta_s_per_byte", c.link.beta_s},
                       {"fit", c.fit}, {"curve", curve}, {"measured_efficiency", measured},
                       {"latency_dominates_above_nodes", c.latency_above ? json(*c.latency_above) : json(nullptr)},
                       {"hd_wins_from_nodes", c.hd_from ? json(*c.hd_from) : json(nullptr)}});
    }
    out.push_back({{"model", mp.one_rank->model}, {"batch", mp.one_rank->batch},
                   {"image_size", mp.one_rank->image_size}, {"one_rank_point", mp.one_rank->id}, {"links", links}});
  }
  return out;
}

json check_json(const ModelCheck& mc) {
  json rows = json::array();
  for (const auto& r : mc.rows)
    rows.push_back({{"point", r.point->id}, {"fit", r.fit}, {"repeats", r.repeats}, {"measured_step_s", r.measured_s},
                    {"predicted_step_s", r.predicted_s}, {"error", r.error()},
                    {"measured_exposed_s", r.measured_exposed_s}, {"predicted_exposed_s", r.predicted_exposed_s},
                    {"in_situ_allreduce_over_fit", r.in_situ_ratio ? json(*r.in_situ_ratio) : json(nullptr)},
                    {"predicted_from_one_node_step_s",
                     r.predicted_from_one_node_s ? json(*r.predicted_from_one_node_s) : json(nullptr)}});
  for (size_t i = 0; i < mc.rows.size(); ++i)  // several ranks per node only
    if (const CheckRow& r = mc.rows[i]; r.hierarchical || r.predicted_hier_s)
      rows[i].update({{"ranks", r.ranks}, {"hierarchical", r.hierarchical},
                      {"predicted_hier_step_s", r.predicted_hier_s ? json(*r.predicted_hier_s) : json(nullptr)},
                      {"hier_cost", r.hierarchical ? r.fit : r.hier_fit}});
  json fits = json::array();
  for (const auto& f : mc.fits) fits.push_back(fit_json(f));
  return {{"fits", fits}, {"check", rows}, {"unchecked", mc.unchecked},
          {"median_abs_error", mc.rows.empty() ? json(nullptr) : json(mc.median_abs_error())},
          {"max_abs_error", mc.rows.empty() ? json(nullptr) : json(mc.max_abs_error())}};
}

json hierarchical_json(const std::vector<HierPrediction>& predictions) {
  json out = json::array();
  for (const auto& hp : predictions) {
    json rows = json::array();
    for (const auto& r : hp.rows)
      rows.push_back({{"bytes", r.bytes}, {"flat_predicted_s", r.flat_predicted_s},
                      {"hier_predicted_s", r.hier_predicted_s}, {"predicted_ratio", r.predicted_ratio()},
                      {"hier_model_s", r.hier_model_s ? json(*r.hier_model_s) : json(nullptr)},
                      {"flat_busbw_gbps", r.flat_busbw},
                      {"hier_busbw_gbps", r.hier_busbw > 0 ? json(r.hier_busbw) : json(nullptr)},
                      {"serial_hier_busbw_gbps", r.serial_busbw > 0 ? json(r.serial_busbw) : json(nullptr)},
                      {"measured_ratio", r.hier_busbw > 0 ? json(r.measured_ratio()) : json(nullptr)}});
    const HierCost& c = hp.cost;
    const json within = c.within ? json{{"alpha_s", c.within->alpha_s}, {"beta_s_per_byte", c.within->beta_s},
                                        {"r2", c.within->r2}}
                                 : json(nullptr);
    out.push_back({{"transport", c.transport}, {"nodes", c.nodes}, {"ranks_per_node", c.per_node},
                   {"alpha_s", c.across.alpha_s}, {"beta_s_per_byte", c.across.beta_s}, {"r2", c.across.r2},
                   {"within_node", within}, {"chunk_bytes", c.chunk_bytes}, {"rows", rows}});
  }
  return out;
}

// "emulated, link 1gbit, 1 CPU per node".
std::string cluster_text(const json& c) {
  if (!c.is_object()) return "unknown";
  std::string s = c.value("type", "unknown");
  if (c.contains("link") && c["link"].is_string()) s += ", link " + c["link"].get<std::string>();
  if (c.contains("cpus_per_node") && c["cpus_per_node"].is_number_integer())
    s += ", " + std::to_string(c["cpus_per_node"].get<int>()) + " CPU(s) per node";
  if (c.contains("ranks_per_node") && c["ranks_per_node"].is_number_integer())
    s += ", " + std::to_string(c["ranks_per_node"].get<int>()) + " ranks per node";
  return s;
}

}  // namespace

void add_predict_options(CLI::App& cmd, PredictArgs& a) {
  cmd.add_option("run_dir", a.run_dir, "A sweep's results directory (its raw.jsonl)")->required();
  cmd.add_option("--json", a.json_path, "Also write the fits, the check and the predictions as JSON to this file");
  cmd.add_option("--what-if", a.what_if, "Replace the measured hardware with the one FILE.yaml describes "
                 "(links, latency, CPU per byte, compute per step; every number with its source)");
  cmd.add_option("--algo-table", a.algo_table, "Also write the allreduce cost table (JSON) for `allreduce --algo auto "
                 "--algo-table FILE`: per transport and N, the algorithm (ring, hd, direct, rd) predicted fastest per size "
                 "range from the alpha-beta fitted to it; only algorithms the run measured at that N");
  cmd.add_option("--max-nodes", a.max_nodes, "Predict for N = 1, 2, 4, ... up to this")
      ->capture_default_str()->check(CLI::Range(2, 1 << 20));
}

int run_predict(const PredictArgs& a) {
  if (!a.algo_table.empty() && !a.what_if.empty()) throw Error("--algo-table comes from a run's fits, not with --what-if");
  if (!a.algo_table.empty()) check_output_path(a.algo_table, "--algo-table");
  const report::Run run = report::load_run(a.run_dir, 0.10);
  if (!a.what_if.empty()) {
    const std::string text = read_config_file(a.what_if, "the what-if file");
    if (is_remote_what_if(text)) {
      std::printf("%s", md_remote_what_if(parse_remote_what_if(text, a.what_if), run).c_str());
      return 0;
    }
    const WhatIf w = parse_what_if(text, a.what_if);
    std::printf("%s", md_what_if(w, run_what_if(w, run)).c_str());
    return 0;
  }
  const ModelCheck mc = check_model(run);
  std::printf("# ringbench predict %s: sweep %s, run %s, cluster %s\n", a.run_dir.c_str(), run.sweep.c_str(),
              run.run_id.c_str(), cluster_text(run.cluster).c_str());
  std::printf("\n## Allreduce cost fits (ring: time = 2(N-1)*alpha + 2(N-1)/N*bytes*beta; direct: alpha + "
              "(N-1)*bytes*beta; rd: log2 N*(alpha + bytes*beta))\n\n%s",
              md_fits(mc).c_str());
  std::printf("## Model check: predicted vs measured step time\n\n%s",
              mc.rows.empty() ? "No train point could be checked.\n\n" : md_check_rows(mc).c_str());
  for (const auto& u : mc.unchecked) std::printf("- not checked: %s\n", u.c_str());
  if (!a.algo_table.empty()) {
    const AlgoTable table = choose_algorithms(mc.fits, "ringbench predict " + a.run_dir + " (sweep " + run.sweep +
                                                           ", run " + run.run_id + ")");
    std::printf("\n## Allreduce algorithm per size (the cost table, --algo-table %s)\n\n%s", a.algo_table.c_str(),
                md_algo_table(table).c_str());
    write_file_atomic(a.algo_table, algo_table_json(table));
    std::printf("wrote %s\n", a.algo_table.c_str());
  }
  const auto hierarchical = predict_hierarchical(run, mc.fits);
  if (!hierarchical.empty())
    std::printf("\n## Hierarchical allreduce: predicted and measured gain over the flat ring\n\n%s",
                md_hierarchical(hierarchical).c_str());
  if (const std::string training = md_hierarchical_training(mc); !training.empty())
    std::printf("\n## Hierarchical training: the step predicted with the hierarchical allreduce\n\n%s", training.c_str());
  const auto predictions = predict_run(run, mc.fits, powers_of_two_nodes(a.max_nodes));
  std::printf("\n## Predictions: scaling efficiency from each model's one-rank timeline (ring, hd = halving-doubling, "
              "--algo hd; measured where the run has it)\n\n");
  if (predictions.empty()) std::printf("No prediction: the run needs an N=1 train point with a timeline and a ring fit.\n");
  for (const auto& mp : predictions) std::printf("%s", md_model_prediction(mp, nullptr).c_str());
  if (!a.json_path.empty()) {
    json doc = check_json(mc);
    doc["predictions"] = predictions_json(predictions);
    doc["hierarchical"] = hierarchical_json(hierarchical);
    write_file_atomic(a.json_path, doc.dump(1) + "\n");
    std::printf("wrote %s\n", a.json_path.c_str());
  }
  return 0;
}

}  // namespace ringbench
