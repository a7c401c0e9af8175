#include "runner/predict/md_predictions.h"

#include "runner/analysis/format.h"

namespace ringbench::predict {

using report::fixed;

namespace {

// "mobilenet_v1 b8 96px".
std::string config_name(const report::Point& p) { return p.model + report::batch_suffix(p); }

std::string notes(const LinkCurve& c) {
  std::string s = "- " + c.link.name + " (α " + fixed(c.link.alpha_s * 1e6, 2) + " us, β " +
                  fixed(c.link.beta_s * 1e9, 4) + " ns/B; " + c.fit + "): ";
  s += c.latency_above ? "the ring's latency terms outweigh its bandwidth terms above N ≈ " + fixed(*c.latency_above, 0)
                       : "no latency term (α = 0)";
  s += c.hd_from ? "; halving-doubling would beat the ring by 5% or more from N = " + std::to_string(*c.hd_from)
                 : "; halving-doubling never beats the ring by 5% up to N = " + std::to_string(c.curve.back().nodes);
  return s + ".\n";
}

std::string table(const ModelPrediction& mp) {
  std::vector<std::string> head = {"N"};
  std::string align = "r";
  for (const auto& c : mp.links) {
    head.insert(head.end(), {c.link.name + " ring", c.link.name + " hd", c.link.name + " measured"});
    align += "rrr";
  }
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < mp.links[0].curve.size(); ++i) {
    std::vector<std::string> row = {std::to_string(mp.links[0].curve[i].nodes)};
    for (const auto& c : mp.links) {
      const auto m = c.measured_efficiency.find(c.curve[i].nodes);
      row.insert(row.end(), {fixed(c.curve[i].ring_efficiency, 3), fixed(c.curve[i].hd_efficiency, 3),
                             m == c.measured_efficiency.end() ? "-" : fixed(m->second, 3)});
    }
    rows.push_back(row);
  }
  return report::md_table(head, align, rows);
}

report::Plot plot(const ModelPrediction& mp) {
  const report::Point& one = *mp.one_rank;
  const std::string label = config_name(one);
  report::Plot p{"predict-" + report::file_safe(one.model) + "-b" + std::to_string(one.batch) +
                     (one.image_size ? "-s" + std::to_string(one.image_size) : ""),
                 label + ": predicted scaling efficiency vs nodes (lines) and measured (points)",
                 "nodes (N, one rank each)", "scaling efficiency",
                 "set logscale x 2\nset xrange [1:" + std::to_string(mp.links[0].curve.back().nodes) +
                     "]\nset yrange [0:1.05]\n",
                 "", ""};
  int index = 0;
  auto block = [&](const std::string& title, const std::string& rows, const std::string& style) {
    p.dat += "# " + title + "\n" + rows + "\n\n";
    p.plot += (p.plot.empty() ? "plot " : ", \\\n     ") + report::gp_quote(p.name + ".dat") + " index " +
              std::to_string(index++) + " using 1:2 with " + style + " title " + report::gp_quote(title);
  };
  for (size_t i = 0; i < mp.links.size(); ++i) {
    const auto& c = mp.links[i];
    std::string ring, hd, measured;
    for (const auto& x : c.curve) {
      ring += report::num6(x.nodes) + " " + report::num6(x.ring_efficiency) + "\n";
      hd += report::num6(x.nodes) + " " + report::num6(x.hd_efficiency) + "\n";
    }
    for (const auto& [n, e] : c.measured_efficiency) measured += report::num6(n) + " " + report::num6(e) + "\n";
    const std::string color = " lc " + std::to_string(i + 1);
    block(c.link.name + " ring (predicted)", ring, "lines lw 2" + color);
    block(c.link.name + " halving-doubling (predicted)", hd, "lines dt 2" + color);
    if (!measured.empty()) block(c.link.name + " measured", measured, "points pt 7 ps 1.2" + color);
  }
  return p;
}

}  // namespace

std::string md_model_prediction(const ModelPrediction& mp, report::Plotter* plotter) {
  std::string md = "### " + config_name(*mp.one_rank) + "\n\n" + table(mp);
  for (const auto& c : mp.links) md += notes(c);
  md += "\n";
  if (plotter && plotter->enabled()) {
    const report::Plot p = plot(mp);
    plotter->render(p);
    md += report::image(config_name(*mp.one_rank) + ": predicted scaling efficiency", p.name);
  }
  return md;
}

std::string md_predictions(const report::Run& run, const std::vector<TransportFit>& fits, report::Plotter& plotter) {
  const auto predictions = predict_run(run, fits, powers_of_two_nodes());
  if (predictions.empty()) return "";
  std::string md =
      "## Predictions\n\n"
      "Scaling efficiency `(thr(N)/N)/thr(1)` as the model predicts it for N = 1 to 1024 (one rank per node, the "
      "batch per rank fixed): each model's one-rank timeline (compute measured alone) replayed with each "
      "transport's fitted α and β (the model check's fits). *measured*: this run's points. *hd*: Rabenseifner's "
      "recursive halving and doubling (2·log2 N messages instead of the ring's 2(N-1), the same bytes), which "
      "ringbench does not implement: what the model says it would change. These are predictions, not "
      "measurements; where the nodes of this run share cores, the measured points fall below the lines by what "
      "that contention costs (the model check's *from N=1 compute* column).\n\n";
  for (const auto& mp : predictions) md += md_model_prediction(mp, &plotter);
  return md;
}

}  // namespace ringbench::predict
