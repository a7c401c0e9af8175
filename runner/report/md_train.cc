// report.md's training sections: per model and config, where the time goes, stragglers.
#include "runner/report/sections.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "runner/backends/backend.h"
#include "runner/analysis/format.h"
#include "runner/report/md_groups.h"

namespace ringbench::report {
namespace {

std::string stragglers_cell(const Point& p) {
  std::map<int, int> by_rank;
  for (const auto& s : p.stragglers) ++by_rank[s.rank];
  std::string c;
  for (const auto& [rank, n] : by_rank)
    c += (c.empty() ? "" : ", ") + ("rank " + std::to_string(rank)) + " in " + std::to_string(n) +
         "/" + std::to_string(p.total.size());
  return c.empty() ? "-" : c;
}

std::vector<std::string> train_row(const Point& p) {
  std::vector<std::string> row = {std::to_string(p.nodes), p.transport, p.profile};
  if (p.total.empty()) {
    const std::string why = not_ok_text(p);
    row.insert(row.end(), {why, "", "", "", "", "", "", ""});
    return row;
  }
  std::vector<double> totals;
  for (const auto& t : p.total) totals.push_back(t.second);
  MeanCi total = mean_ci(totals);
  total.mean = median(totals);
  const auto secs = [](const std::optional<double>& v) { return v ? fixed(*v, 4) : "-"; };
  row.push_back(with_ci(total, 1));
  row.push_back(p.per_rank.empty() ? "-" : fixed(median(p.per_rank), 1));
  row.push_back(p.efficiency ? with_ci(*p.efficiency, 3) : p.efficiency_na);
  row.push_back(secs(p.step_s));
  row.push_back(secs(p.compute_s));
  row.push_back(secs(p.exposed_s));
  row.push_back(p.hidden ? percent(*p.hidden) : "-");
  row.push_back(stragglers_cell(p));
  return row;
}

// "mpi vs tcp" tables of one (model, batch, image size); `suffix` names it in the heading.
std::string md_ratios(const std::vector<const Point*>& pts, const std::string& suffix) {
  std::map<std::string, std::vector<const Point*>> by_transport;
  std::vector<std::string> order;
  for (const Point* p : pts) {
    if (!p->ratio_vs_tcp) continue;
    if (!by_transport.count(p->transport)) order.push_back(p->transport);
    by_transport[p->transport].push_back(p);
  }
  std::string md;
  for (const auto& t : order) {
    std::vector<std::vector<std::string>> rows;
    for (const Point* p : by_transport[t]) {
      const Point* tcp = nullptr;
      for (const Point* o : pts)
        if (o->nodes == p->nodes && o->profile == p->profile && o->transport == kBaselineBackend) tcp = o;
      rows.push_back({std::to_string(p->nodes), p->profile, fixed((*throughput_value(*p))[0], 1),
                      fixed((*throughput_value(*tcp))[0], 1), with_ci(*p->ratio_vs_tcp, 3, "×")});
    }
    md += "### " + t + " vs tcp" + suffix + "\n\n" +
          md_table({"N", "profile", t + " total img/s", "tcp total img/s", t + " / tcp"}, "rlrrr",
                   rows);
  }
  return md;
}

std::string config_text(const Point& p) {
  return "batch " + std::to_string(p.batch) + " per rank, " +
         (p.image_size > 0 ? "image size " + std::to_string(p.image_size) : "default image size") +
         axes_label(p, ", ", true);
}

// One table per (batch, image size) of a model, its ratio tables, then the model's plots.
std::string md_model(const Run& run, const std::vector<const Point*>& pts, Plotter& plotter) {
  const std::string model = pts.front()->model;
  const bool multi = multi_config_models(run).count(model) > 0;
  std::string md = "## " + model + "\n\n";
  for (const auto& config : by_config(pts)) {
    const std::string text = config_text(*config.front());
    md += multi ? "### " + text + "\n\n" : "Training with " + text + ".\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const Point* p : config) rows.push_back(train_row(*p));
    md += md_table({"N", "transport", "profile", "total img/s", "img/s per rank",
                    "scaling efficiency", "step s", "compute s", "exposed comm s", "hidden %",
                    "stragglers"},
                   "rllrrrrrrrl", rows);
    md += md_ratios(config, multi ? " (" + text + ")" : "");
  }
  if (plotter.enabled())
    for (const auto& name : model_plots(run, pts, plotter))
      md += image(name.substr(file_safe(model).size() + 1) + " of " + model, name);
  return md;
}

}  // namespace

std::string md_train(const Run& run, Plotter& plotter) {
  std::string md;
  for (const auto& model : by_model(points_of(run, PointKind::train))) md += md_model(run, model, plotter);
  return md;
}

std::string md_time(const Run& run, Plotter& plotter) {
  const auto multi = multi_config_models(run);
  const auto points = points_of(run, PointKind::train);
  auto any = [&](auto field) {
    return std::any_of(points.begin(), points.end(), [&](const Point* p) { return (p->*field).has_value(); });
  };
  // Runs from before train measured CPU time have none, synthetic data has no input pipeline:
  // those columns only when some point has them.
  const bool cpus = any(&Point::cpus_busy), input = any(&Point::input_stall_s);
  std::vector<std::vector<std::string>> rows;
  for (const Point* p : points) {
    if (!p->step_s || !p->compute_s || !p->exposed_s || !p->optimizer_s) continue;
    rows.push_back({label(*p, multi.count(p->model) > 0), fixed(*p->step_s, 4),
                    fixed(*p->compute_s, 4), fixed(*p->exposed_s, 4), fixed(*p->optimizer_s, 4),
                    p->allreduce_s ? fixed(*p->allreduce_s, 4) : "-",
                    p->hidden ? percent(*p->hidden) : "-"});
    if (input) {
      rows.back().push_back(p->input_stall_s ? fixed(*p->input_stall_s, 4) : "-");
      rows.back().push_back(p->input_cpus ? fixed(*p->input_cpus, 2) : "-");
    }
    if (cpus) rows.back().push_back(p->cpus_busy ? fixed(*p->cpus_busy, 2) : "-");
  }
  if (rows.empty()) return "";
  std::vector<std::string> head = {"point", "step s", "compute s", "exposed comm s", "optimizer s", "allreduce s",
                                   "hidden %"};
  if (input) head.insert(head.end(), {"input stall s", "input CPUs"});
  if (cpus) head.push_back("CPUs busy");
  std::string md =
      "## Where the time goes\n\nSeconds per step, mean over ranks and repeats: step = compute "
      "(input, forward, backward) + exposed comm (waiting for the allreduce after backward) + "
      "optimizer. The allreduce runs during backward: only its exposed part adds to the "
      "step." +
      std::string(input ? " Input stall: the part of compute a rank waited for its input pipeline (decoding "
                          "and augmenting real images on its CPUs, --data jpeg); input CPUs: the CPUs the "
                          "pipeline's threads kept busy (part of CPUs busy)."
                        : "") +
      std::string(cpus ? " CPUs busy: a rank's process CPU time over its wall time (its compute threads, "
                         "its communication thread, and any waiting they do by spinning), mean over ranks "
                         "and repeats: the CPU a transport costs, and the share a busy machine left."
                       : "") +
      "\n\n" + md_table(head, std::string("lrrrrrr") + (input ? "rr" : "") + (cpus ? "r" : ""), rows);
  if (plotter.enabled() && time_breakdown_plot(run, plotter))
    md += image("time per step: compute, exposed comm, optimizer", "time-breakdown");
  return md;
}

std::string md_stragglers(const Run& run, const ReportOptions& opts) {
  const auto train = points_of(run, PointKind::train);
  if (train.empty()) return "";
  char margin[32];
  std::snprintf(margin, sizeof margin, "%g%%", 100 * opts.straggler_margin);
  std::string md = std::string("## Stragglers\n\nIn every ok training run, each rank's median step ") +
                   "time against the median of the ranks' medians; flagged above it by more than " +
                   margin + ".\n\n";
  std::vector<std::vector<std::string>> rows;
  for (const Point* p : train)
    for (const auto& s : p->stragglers)
      rows.push_back({p->id, std::to_string(s.repeat), std::to_string(s.rank), s.host,
                      fixed(s.median_s, 4), fixed(s.ranks_median_s, 4),
                      percent(s.median_s / s.ranks_median_s - 1)});
  if (rows.empty()) return md + "No straggler.\n\n";
  return md + md_table({"point", "repeat", "rank", "host", "rank's median step s",
                        "ranks' median s", "excess"},
                       "lrrlrrr", rows);
}

}  // namespace ringbench::report
