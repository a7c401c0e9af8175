// The described hardware applied to RUN_DIR's timelines, and its markdown.
#include <algorithm>

#include "base/errors.h"
#include "runner/predict/whatif.h"
#include "runner/analysis/format.h"

namespace ringbench::predict {

using report::fixed;

namespace {

// RUN_DIR's one-rank point of the model with a timeline, of the same batch where there is one.
const report::Point* one_rank_point(const report::Run& run, const WhatIfModel& m) {
  const report::Point* best = nullptr;
  for (const report::Point* p : report::points_of(run, PointKind::train)) {
    std::string why;
    if (p->model != m.model || p->nodes != 1 || p->status() != "ok" || !mean_timeline(*p, why)) continue;
    if (!best || (p->batch == m.batch && best->batch != m.batch)) best = p;
  }
  return best;
}

StepTimeline scaled(StepTimeline t, double s) {
  t.compute_s *= s, t.optimizer_s *= s;
  for (auto& b : t.buckets) b.ready_s *= s;
  return t;
}

double efficiency_at(const StepTimeline& t, const LinkCost& link, int nodes) {
  return scaling_curve(t, link, {nodes}).back().ring_efficiency;
}

std::string sourced(const Sourced& s, int decimals) { return fixed(s.value, decimals); }

}  // namespace

std::vector<WhatIfResult> run_what_if(const WhatIf& w, const report::Run& run) {
  std::vector<WhatIfResult> out;
  for (const WhatIfModel& m : w.models) {
    WhatIfResult r{&m, one_rank_point(run, m), {}, {}, {}};
    if (!r.timeline_from)
      throw Error(w.origin + ": models: " + m.model + ": the run has no one-rank point of " + m.model +
                  " with a step timeline (its bucket sizes and release times); add one to the sweep (nodes: [1, ...])");
    std::string why;
    const StepTimeline measured = *mean_timeline(*r.timeline_from, why);
    r.timeline = scaled(measured, m.compute_s.value / measured.compute_s);
    if (m.optimizer_s) r.timeline.optimizer_s = m.optimizer_s->value;
    if (m.gradient_wire != "fp32")  // the run measured fp32 buckets; 2-byte elements halve them
      for (auto& b : r.timeline.buckets) b.bytes /= 2;
    for (const auto& t : w.transports) r.links.push_back(link_curve(r.timeline, t.cost(), "described", w.nodes));
    const WhatIfTransport& first = w.transports.front();
    const WhatIfTransport& base = *std::find_if(w.transports.begin(), w.transports.end(),
                                                [&](const auto& t) { return t.name == w.baseline; });
    for (double gbps : w.grid_link_gbps) {
      std::vector<double> row;
      for (double c : w.grid_compute_scale) {
        const StepTimeline t = scaled(r.timeline, c);
        row.push_back(efficiency_at(t, first.cost(gbps), w.check_nodes) / efficiency_at(t, base.cost(gbps), w.check_nodes));
      }
      r.ratio.push_back(row);
    }
    out.push_back(r);
  }
  return out;
}

namespace {

std::string hardware_md(const WhatIf& w) {
  std::vector<std::vector<std::string>> rows;
  std::string sources;
  for (const auto& t : w.transports) {
    const LinkCost c = t.cost();
    rows.push_back({t.name, sourced(t.link_gbps, 1), sourced(t.efficiency, 3), sourced(t.latency_us, 2),
                    sourced(t.cpu_ns_per_byte, 4), fixed(c.alpha_s * 1e6, 2), fixed(c.beta_s * 1e9, 4),
                    fixed(1e-9 / c.beta_s, 2)});
    for (auto [k, s] : {std::pair{"link_gbps", &t.link_gbps}, {"efficiency", &t.efficiency},
                        {"latency_us", &t.latency_us}, {"cpu_ns_per_byte", &t.cpu_ns_per_byte}})
      sources += "- " + t.name + " " + k + " = " + fixed(s->value, 4) + ": " + s->source + "\n";
  }
  return report::md_table({"transport", "link Gbit/s", "efficiency", "latency us", "CPU ns/B", "α us", "β ns/B",
                           "1/β GB/s"},
                          "lrrrrrrr", rows) +
         "Sources:\n" + sources + "\n";
}

std::string models_md(const std::vector<WhatIfResult>& results) {
  std::vector<std::vector<std::string>> rows;
  std::string sources;
  for (const auto& r : results) {
    double bytes = 0;
    for (const auto& b : r.timeline.buckets) bytes += b.bytes;
    rows.push_back({r.model->model, std::to_string(r.model->batch), fixed(r.model->compute_s.value, 4),
                    fixed(r.model->batch / (r.model->compute_s.value + r.timeline.optimizer_s), 1),
                    fixed(bytes / (1 << 20), 1), std::to_string(r.timeline.buckets.size()), r.timeline_from->id});
    sources += "- " + r.model->model + " compute_s = " + fixed(r.model->compute_s.value, 4) + ": " +
               r.model->compute_s.source + "\n";
    if (r.model->optimizer_s)
      sources += "- " + r.model->model + " optimizer_s: " + r.model->optimizer_s->source + "\n";
    if (r.model->gradient_wire != "fp32")
      sources += "- " + r.model->model + " gradients cross the wire as " + r.model->gradient_wire +
                 " (gradient_wire): the measured fp32 buckets' bytes halved\n";
  }
  return report::md_table({"model", "batch", "compute s/step", "img/s on one GPU", "gradients MiB", "buckets",
                           "timeline shape from"},
                          "lrrrrrl", rows) +
         "Sources:\n" + sources + "\n";
}

std::string curve_md(const WhatIf& w, const WhatIfResult& r) {
  std::vector<std::string> head = {"N"};
  for (const auto& c : r.links) head.push_back(c.link.name + " efficiency");
  head.push_back(w.transports.front().name + " / " + w.baseline);
  size_t base = 0;
  while (r.links[base].link.name != w.baseline) ++base;
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    std::vector<std::string> row = {std::to_string(w.nodes[i])};
    for (const auto& c : r.links) row.push_back(fixed(c.curve[i].ring_efficiency, 3));
    row.push_back(fixed(r.links[0].curve[i].ring_efficiency / r.links[base].curve[i].ring_efficiency, 2) + "x");
    rows.push_back(row);
  }
  return report::md_table(head, std::string(head.size(), 'r'), rows);
}

std::string grid_md(const WhatIf& w, const WhatIfResult& r) {
  std::vector<std::string> head = {"link Gbit/s \\ compute per step"};
  for (double c : w.grid_compute_scale)
    head.push_back(fixed(c, 3) + "x (" + fixed(c * r.model->compute_s.value * 1e3, 0) + " ms)");
  std::vector<std::vector<std::string>> rows;
  std::string holds;
  for (size_t i = 0; i < w.grid_link_gbps.size(); ++i) {
    std::vector<std::string> row = {fixed(w.grid_link_gbps[i], 0)};
    for (size_t j = 0; j < w.grid_compute_scale.size(); ++j) {
      const double x = r.ratio[i][j];
      row.push_back(x >= 2 ? "**" + fixed(x, 2) + "x**" : fixed(x, 2) + "x");
      if (x >= 2)
        holds += (holds.empty() ? "" : "; ") + fixed(w.grid_link_gbps[i], 0) + " Gbit/s with " +
                 fixed(w.grid_compute_scale[j], 3) + "x the compute time";
    }
    rows.push_back(row);
  }
  std::string md = report::md_table(head, std::string(head.size(), 'r'), rows);
  const size_t described = size_t(std::find(w.grid_compute_scale.begin(), w.grid_compute_scale.end(), 1.0) -
                                  w.grid_compute_scale.begin());
  for (size_t i = 0; i < w.grid_link_gbps.size() && described < w.grid_compute_scale.size(); ++i)
    if (w.grid_link_gbps[i] == w.transports.front().link_gbps.value)
      md += "As described (" + fixed(w.grid_link_gbps[i], 0) + " Gbit/s, " +
            fixed(r.model->compute_s.value * 1e3, 0) + " ms of compute per step): " + fixed(r.ratio[i][described], 2) +
            "x.\n";
  md += holds.empty() ? "2x or more: nowhere on this grid.\n\n" : "2x or more (bold): " + holds + ".\n\n";
  return md;
}

}  // namespace

std::string md_what_if(const WhatIf& w, const std::vector<WhatIfResult>& results) {
  const std::string first = w.transports.front().name;
  std::string md = "# What-if: " + w.name + " (" + w.origin + ")\n\n" +
                   (w.description.empty() ? "" : w.description + "\n\n") +
                   "**Predictions, not measurements:** the hardware below is described, not measured; each "
                   "model's timeline shape (bucket sizes, when backward releases each) is measured in the run "
                   "and scaled to the described compute time.\n\n## Described transports\n\n" +
                   hardware_md(w) + "## Described models\n\n" + models_md(results);
  for (const auto& r : results) {
    md += "## " + r.model->model + " b" + std::to_string(r.model->batch) + ": predicted scaling efficiency\n\n" +
          curve_md(w, r) + "### " + first + " / " + w.baseline + " efficiency at N = " +
          std::to_string(w.check_nodes) + ", by link rate and compute time per step\n\n" +
          "Compute time per step is batch / GPU img/s: a faster GPU, fp16, or a smaller batch shortens it.\n\n" +
          grid_md(w, r);
  }
  return md;
}

}  // namespace ringbench::predict
