// report.md's "Live migration" section (migrate points): per method and framebuffer the stun time,
// what was copied stunned and before, the total and the ring's stall; the job's img/s at the
// stalled step; the stun model (stop-and-copy: t0 + F/R by least squares; pre-copy: t0 + W/R)
// with its predictions for larger framebuffers, marked predicted; and a plot of stun against
// framebuffer size, both methods, with vMotion's 1 s line.
#include <algorithm>
#include <map>
#include <tuple>

#include "runner/analysis/format.h"
#include "runner/report/migrate_model.h"
#include "runner/report/sections.h"
#include "runner/record/json_fields.h"

namespace ringbench::report {
namespace {

// "0.412 (0.401–0.430)" over several values, "0.412" for one (or where they round alike), "-"
// for none; `unit` after each number.
std::string spread(const std::vector<double>& v, int decimals, const std::string& unit = "") {
  if (v.empty()) return "-";
  const std::string m = fixed(median(v), decimals) + unit;
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  const std::string low = fixed(*lo, decimals) + unit, high = fixed(*hi, decimals) + unit;
  return low == high ? m : m + " (" + low + "–" + high + ")";
}

template <class Field>
std::vector<double> of_moved(const MigrationRow& row, Field field) {
  std::vector<double> v;
  for (const MigrationRun* r : row.moved()) v.push_back(field(*r));
  return v;
}

std::string row_framebuffer(const MigrationRow& row) {
  const std::string size = row.framebuffer_bytes > 0 ? fb_size_text(row.framebuffer_bytes) : "?";
  return row.point->profile == "none" ? size : size + " (" + row.point->profile + ")";
}

// The first migration object of the rows' records (where it went, the rank's state).
const json* first_migration(const std::vector<MigrationRow>& rows) {
  for (const auto& row : rows)
    for (const Record* r : row.point->ok())
      if (const json* m = find_at(r->j, "/migrate/migration"); m && m->is_object()) return m;
  return nullptr;
}

// The first number at `pointer` of the rows' records (0 where none has it).
int first_int(const std::vector<MigrationRow>& rows, const char* pointer) {
  for (const auto& row : rows)
    for (const Record& r : row.point->repeats)
      if (const auto v = number_at(r.j, pointer)) return int(*v);
  return 0;
}

std::string intro(const std::vector<MigrationRow>& rows, const Run& run) {
  const Point& p = *rows.front().point;
  const json* m = first_migration(rows);
  const std::string link = run.cluster.contains("link") && run.cluster["link"].is_string()
                               ? run.cluster["link"].get<std::string>() + " links"
                               : "links not rate-limited";
  std::string to = "another process";
  if (m) {
    const std::string netns = str_or(*m, "netns", "");
    to = str_or(*m, "to", "?") + (m->value("standby", false) ? " (a standby process started with the job there)"
                                  : netns.empty()            ? " (this host)"
                                                             : " (namespace " + netns + ")");
  }
  return "### " + p.model + batch_suffix(p) + " on " + std::to_string(p.nodes) + " nodes (" + p.transport + ")\n\n" +
         "Rank " + (m ? std::to_string(int_or(*m, "rank", -1)) : std::string("?")) + " moves to " + to + " once " +
         std::to_string(first_int(rows, "/migrate_at")) + " steps are done (" +
         std::to_string(first_int(rows, "/migrate/meta/warmup")) +
         " of them warmup), over " + link + "; the other ranks wait at their next allreduce meanwhile. "
         "**Pre-copy** copies the framebuffer while the rank trains on, round after round, then stuns the rank "
         "and copies what is still dirty; **stop-and-copy** stuns it and copies everything. Stun: from the source "
         "stopping to the target starting its first step. Median over the repeats that moved, min–max in "
         "brackets where there are several.\n\n";
}

std::string stun_table(const std::vector<MigrationRow>& rows) {
  std::vector<std::vector<std::string>> cells;
  for (const auto& row : rows) {
    const Point& p = *row.point;
    std::vector<std::string> c = {method_text(p.method), row_framebuffer(row),
                                  std::to_string(row.moved().size()) + "/" + std::to_string(p.repeats.size())};
    if (row.moved().empty()) {
      const std::string why = p.ok().empty() ? not_ok_text(p) : "not moved";
      c.insert(c.end(), 6, why);
    } else {
      c.push_back(spread(of_moved(row, [](const MigrationRun& r) { return r.stun_s; }), 3));
      c.push_back(spread(of_moved(row, [](const MigrationRun& r) { return r.stun_bytes / kMiB; }), 1));
      c.push_back(spread(of_moved(row, [](const MigrationRun& r) { return r.precopy_rounds; }), 0));
      c.push_back(spread(of_moved(row, [](const MigrationRun& r) { return r.precopy_bytes / kMiB; }), 0));
      c.push_back(spread(of_moved(row, [](const MigrationRun& r) { return r.total_s; }), 2));
      c.push_back(spread(of_moved(row, [](const MigrationRun& r) { return r.ring_stall_s; }), 3));
    }
    cells.push_back(c);
  }
  return md_table({"method", "framebuffer", "moved", "stun s", "stun MiB", "pre-copy rounds", "pre-copied MiB",
                   "total s", "ring stall s"},
                  "llrrrrrrr", cells);
}

// The repeats that ran but whose rank did not move, or whose stun the run's last step forced.
std::string exceptions(const std::vector<MigrationRow>& rows) {
  std::string md;
  for (const auto& row : rows)
    for (const auto& r : row.runs) {
      const std::string item = "- `" + row.point->id + "` repeat " + std::to_string(r.repeat) + ": ";
      if (r.moved && r.forced)
        md += item + "the run's last step forced the stun (the target not ready, or pre-copy not converged): in "
                     "the tables, not in the model or the plot.\n";
      else if (!r.moved)
        md += item +
              (r.recorded ? "the rank did not move (" + one_line(r.error.empty() ? "no error recorded" : r.error) +
                                "); it resumed on its node and the job trained on"
                          : "no migration recorded") +
              ".\n";
    }
  return md.empty() ? "" : "Not moved, or forced:\n\n" + md + "\n";
}

std::string dip_table(const std::vector<MigrationRow>& rows) {
  std::vector<std::vector<std::string>> cells;
  for (const auto& row : rows) {
    std::vector<double> before, step, img, others, ratio;
    for (const MigrationRun* r : row.moved()) {
      if (!r->dip) continue;
      before.push_back(r->dip->steps_before);
      step.push_back(r->dip->step);
      img.push_back(r->dip->img_s);
      others.push_back(r->dip->others_img_s);
      ratio.push_back(100 * r->dip->img_s / r->dip->others_img_s);
    }
    if (img.empty()) continue;
    cells.push_back({method_text(row.point->method), row_framebuffer(row), spread(before, 0), spread(step, 0),
                     spread(img, 1), spread(others, 1), spread(ratio, 0, "%")});
  }
  if (cells.empty()) return "";
  return "The job's img/s around the stun, from rank 0's step times (N × batch / step s): the stalled step is the "
         "slowest from the migration's start on, the stun's wait part of it; steps counted from 1, warmup "
         "included.\n\n" +
         md_table({"method", "framebuffer", "steps from the start to the stun", "stalled step", "img/s in that step",
                   "img/s, other steps (median)", "that step / the others"},
                  "llrrrrr", cells);
}

std::string stopcopy_text(const MigrationModel& m, const std::string& link) {
  if (!m.stopcopy)
    return "- **Stop-and-copy**: no fit: it needs runs that moved at two framebuffer sizes or more.\n";
  const StunFit& f = *m.stopcopy;
  if (!(f.s_per_byte > 0))
    return "- **Stop-and-copy**: the stun does not grow with the framebuffer over these " + std::to_string(f.runs) +
           " runs (slope " + fixed(f.s_per_byte * kGiB, 3) + " s/GiB): no link rate to predict from.\n";
  const double rate = f.rate_bytes_s();
  return "- **Stop-and-copy**: stun = t0 + F / R, least squares over " + std::to_string(f.runs) + " runs at " +
         std::to_string(f.sizes) + " framebuffer sizes: t0 = " + fixed(f.t0_s, 3) + " s, R = " +
         fixed(rate / kGiB, 3) + " GiB/s (" + fixed(rate * 8 / 1e9, 2) + " Gbit/s; the links: " + link +
         "), R² = " + fixed(f.r2, 3) + ". Linear in F: each GiB more adds " + fixed(kGiB / rate, 3) + " s of stun.\n";
}

// Pre-copy's stun at the links' nominal rate, where the copy ran slower than it (this machine's
// cores, not the link, set R): what the same working set would take on the link alone.
std::string line_rate_text(const MigrationModel& m, const std::string& link) {
  const auto line = tc_rate_bits(link);
  const auto stun = line ? m.precopy_at_line_rate_s(*line) : std::nullopt;
  if (!stun || !(m.stopcopy->s_per_byte > 0) || m.stopcopy->rate_bytes_s() * 8 >= *line) return "";
  return "- At the links' line rate (" + link + ", which the copy did not reach here): pre-copy stun = t0 + W / " +
         link + " = " + fixed(*stun, 3) + " s, for every framebuffer size.\n";
}

std::string precopy_text(const MigrationModel& m, const std::vector<MigrationRow>& rows) {
  if (m.precopy_stun_bytes.empty()) return "";
  const auto& w = m.precopy_stun_bytes;
  const json* mj = first_migration(rows);
  const double state = mj ? number_at(*mj, "/state_bytes").value_or(0) / kMiB : 0;
  std::vector<double> w_mib;
  for (double b : w) w_mib.push_back(b / kMiB);
  std::string md =
      "- **Pre-copy**: the stun copies only what the job rewrote since the last round, its working set W = " +
      spread(w_mib, 1) + " MiB, whatever the framebuffer's size";
  if (state > 0) md += " (the rank's state and activations take " + fixed(state, 1) + " MiB of it)";
  md += ": stun = t0 + W / R";
  if (const auto model = m.precopy_model_s())
    md += " = " + fixed(*model, 3) + " s by the model";
  else
    md += " (no link rate from stop-and-copy: its prediction is the median measured stun)";
  const double worst = *std::max_element(m.precopy_stun_s.begin(), m.precopy_stun_s.end());
  bool forced = false;
  for (const auto& row : rows)
    for (const auto& r : row.runs) forced = forced || (row.point->method == "precopy" && r.moved && r.forced);
  const std::string aside = forced ? " (the stuns the last step forced aside)" : "";
  md += "; measured " + spread(m.precopy_stun_s, 3) + " s. " +
        (worst <= kStunTargetS ? "Within vMotion's 1 s stun at every size measured" + aside + "."
                               : "Over vMotion's 1 s stun at some size measured (" + fixed(worst, 3) + " s).") +
        "\n";
  return md;
}

std::string predictions(const MigrationModel& m, const std::vector<MigrationRow>& rows) {
  std::vector<std::vector<std::string>> cells;
  for (const char* method : {"precopy", "stopcopy"}) {
    const bool ran =
        std::any_of(rows.begin(), rows.end(), [&](const MigrationRow& r) { return r.point->method == method; });
    for (double fb : kPredictedFramebuffers) {
      const auto s = m.predict(method, fb);
      if (!ran || !s) continue;
      cells.push_back({method_text(method), fb_size_text(fb), fixed(*s, 3) + " (predicted)",
                       *s <= kStunTargetS ? "yes (predicted)" : "no (predicted)"});
    }
  }
  if (cells.empty()) return "";
  return "Predicted by the model for framebuffers larger than measured here (**predicted, not measured**):\n\n" +
         md_table({"method", "framebuffer", "stun s", "≤ 1 s"}, "llrl", cells);
}

struct PlotStyle {
  const char* method;
  const char* colour;
  int filled, hollow;  // gnuplot point types
};

// The plot's measured (median, min, max) and predicted series of one method, and its model line.
void method_series(Plot& p, int& index, const PlotStyle& s, const std::vector<MigrationRow>& rows,
                   const MigrationModel& m, double& xmax) {
  const auto clause = [&](const std::string& c) { p.plot += (p.plot.empty() ? "plot " : ", \\\n     ") + c; };
  const std::string name = method_text(s.method), colour = std::string(" lc rgb '") + s.colour + "'";
  std::string measured, predicted;
  for (const auto& row : rows) {
    std::vector<double> stun;
    for (const MigrationRun* r : row.modelled()) stun.push_back(r->stun_s);
    if (row.point->method != s.method || stun.empty()) continue;
    const auto [lo, hi] = std::minmax_element(stun.begin(), stun.end());
    measured +=
        num6(row.framebuffer_bytes / kGiB) + " " + num6(median(stun)) + " " + num6(*lo) + " " + num6(*hi) + "\n";
    xmax = std::max(xmax, row.framebuffer_bytes / kGiB);
  }
  if (measured.empty()) return;
  p.dat += "# " + name + ", measured: framebuffer GiB, stun s median, min, max\n" + measured + "\n\n";
  clause(gp_quote(p.name + ".dat") + " index " + std::to_string(index++) + " using 1:2:3:4 with yerrorbars pt " +
         std::to_string(s.filled) + " ps 1.2" + colour + " title " + gp_quote(name + ", measured"));
  for (double fb : kPredictedFramebuffers)
    if (const auto y = m.predict(s.method, fb)) {
      predicted += num6(fb / kGiB) + " " + num6(*y) + "\n";
      xmax = std::max(xmax, fb / kGiB);
    }
  if (!predicted.empty()) {
    p.dat += "# " + name + ", predicted: framebuffer GiB, stun s\n" + predicted + "\n\n";
    clause(gp_quote(p.name + ".dat") + " index " + std::to_string(index++) + " using 1:2 with points pt " +
           std::to_string(s.hollow) + " ps 1.6" + colour + " title " + gp_quote(name + ", predicted"));
  }
  if (std::string(s.method) == "stopcopy" && m.stopcopy && m.stopcopy->s_per_byte > 0)
    clause(num6(m.stopcopy->t0_s) + " + " + num6(m.stopcopy->s_per_byte * kGiB) + "*x with lines dt 3" + colour +
           " title 'stop-and-copy model: t0 + F/R'");
  if (std::string(s.method) == "precopy")
    if (const auto y = m.precopy_model_s())
      clause(num6(*y) + " with lines dt 3" + colour + " title 'pre-copy model: t0 + W/R'");
}

std::string stun_plot(const std::vector<MigrationRow>& rows, const MigrationModel& m, const std::string& name,
                      Plotter& plotter) {
  if (!plotter.enabled()) return "";
  Plot p{name, "stun time against framebuffer size (filled: measured, median and min-max; hollow: predicted)",
         "framebuffer (GiB)", "stun (s)", "", "", ""};
  int index = 0;
  double xmax = 0;
  for (const PlotStyle& s : {PlotStyle{"stopcopy", "#d62728", 7, 6}, PlotStyle{"precopy", "#1f77b4", 5, 4}})
    method_series(p, index, s, rows, m, xmax);
  if (p.plot.empty()) return "";
  p.plot += ", \\\n     1 with lines dt 2 lc rgb 'gray40' title '1 s (vMotion stun target)'";
  p.setup = "set key below noenhanced\nset xrange [0:" + num6(xmax * 1.08) + "]\nset yrange [0:*]\n";
  plotter.render(p);
  return image("stun time against framebuffer size", name);
}

// The migrate points by job: model, batch, image size, nodes and transport, in report order.
std::vector<std::vector<const Point*>> by_job(const std::vector<const Point*>& pts) {
  std::vector<std::vector<const Point*>> groups;
  std::map<std::tuple<std::string, int, int, int, std::string>, size_t> index;
  for (const Point* p : pts) {
    const auto key = std::tuple(p->model, p->batch, p->image_size, p->nodes, p->transport);
    const auto [it, fresh] = index.emplace(key, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(p);
  }
  return groups;
}

}  // namespace

std::string md_migrate(const Run& run, Plotter& plotter) {
  const std::vector<const Point*> pts = points_of(run, PointKind::migrate);
  if (pts.empty()) return "";
  const std::string link = run.cluster.contains("link") && run.cluster["link"].is_string()
                               ? run.cluster["link"].get<std::string>()
                               : "not rate-limited";
  std::string md = "## Live migration\n\n";
  const auto groups = by_job(pts);
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<MigrationRow> rows = migration_rows(groups[g]);
    const MigrationModel model = migration_model(rows);
    md += intro(rows, run) + stun_table(rows) + exceptions(rows) + dip_table(rows);
    md += "**Model** (stun against the framebuffer F over a link of rate R):\n\n" + stopcopy_text(model, link) +
          precopy_text(model, rows) + line_rate_text(model, link) + "\n" + predictions(model, rows);
    md += stun_plot(rows, model, g ? "migration-stun-" + std::to_string(g + 1) : "migration-stun", plotter);
  }
  return md;
}

}  // namespace ringbench::report
