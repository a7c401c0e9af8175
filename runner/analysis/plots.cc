// The report's plots: throughput and scaling efficiency per model, busbw, the time breakdown
// and the sharing plots, each a gnuplot script and its data beside the SVG.
#include "runner/analysis/plots.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <system_error>

#include "base/errors.h"
#include "base/output_file.h"
#include "base/subprocess.h"
#include "runner/analysis/format.h"

namespace ringbench::report {
namespace {

namespace fs = std::filesystem;

// Runs `gnuplot SCRIPT` in `dir` (the script names its data files relative to it) and returns
// what it wrote to stdout: the SVG.
std::string run_gnuplot(const std::string& gnuplot, const std::string& dir,
                        const std::string& script) {
  const ProcessOutput o = run_process(gnuplot, {"gnuplot", script}, dir);
  if (!o.ok() || o.out.empty())
    throw Error("gnuplot failed on plots/" + script + " (" + gnuplot + "): " +
                one_line(o.err.empty() ? "exit status " + std::to_string(o.status) : o.err));
  if (!o.err.empty()) std::cerr << "ringbench report: gnuplot on plots/" << script << ": " << o.err;
  return o.out;
}

std::string gp_script(const Plot& p) {
  return "# " + p.name + ".svg from " + p.name + ".dat, written by `ringbench report`.\n" +
         "# Regenerate: gnuplot " + p.name + ".gp > " + p.name + ".svg\n" +
         "set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'\n" +
         "set title " + gp_quote(p.title) + " noenhanced\n" +
         "set xlabel " + gp_quote(p.xlabel) + "\n" +
         "set ylabel " + gp_quote(p.ylabel) + "\n" +
         "set grid\nset key outside right top noenhanced\n" + p.setup + p.plot + "\n";
}

std::string nodes_axis(const std::vector<const Point*>& pts) {
  std::set<int> nodes;
  for (const Point* p : pts) nodes.insert(p->nodes);
  std::string tics;
  for (int n : nodes) tics += (tics.empty() ? "" : ", ") + std::to_string(n);
  return "set xrange [" + fixed(*nodes.begin() - 0.5, 1) + ":" + fixed(*nodes.rbegin() + 0.5, 1) +
         "]\nset xtics (" + tics + ")\n";
}

// One series per (config, transport) of a model; every series starts at its N=1 point.
template <class Value>
std::vector<Series> model_series(const Run& run, const std::vector<const Point*>& pts, Value value) {
  const bool multi = multi_config_models(run).count(pts.front()->model) > 0;
  std::map<std::string, Series> by_title;
  std::vector<std::string> order;
  for (const Point* p : pts) {
    const auto v = value(*p);
    if (!v || (p->nodes == 1 && p->transport == "none")) continue;
    const std::string title = p->transport + config_suffix(*p, multi);
    if (!by_title.count(title)) {
      order.push_back(title);
      by_title[title].title = title;
      const Point* base = find_peer(run.points, *p, 1, "none");
      if (const auto b = base ? value(*base) : std::nullopt)
        by_title[title].rows.push_back({1, (*b)[0], (*b)[1]});
    }
    by_title[title].rows.push_back({double(p->nodes), (*v)[0], (*v)[1]});
  }
  std::vector<Series> out;
  for (const auto& t : order) out.push_back(by_title[t]);
  return out;
}

Pair efficiency_value(const Point& p) {
  if (!p.efficiency) return std::nullopt;
  return std::array<double, 2>{p.efficiency->mean, p.efficiency->ci95};
}

// Models shared with more than one (batch, image size).
bool multi_share_config(const std::vector<const Point*>& pts) {
  std::set<std::pair<int, int>> configs;
  for (const Point* p : pts) configs.insert({p->batch, p->image_size});
  return configs.size() > 1;
}

// Mean over the ok repeats of a share point of the number at `pointer`, with its CI.
std::optional<MeanCi> over_repeats(const Point& p, const char* pointer) {
  std::vector<double> v;
  for (const Record* r : p.ok())
    if (auto x = number_at(r->j, pointer)) v.push_back(*x);
  return v.empty() ? std::nullopt : std::optional<MeanCi>(mean_ci(v));
}

// What one model's sharing plots share: the profiles (the x axis's categories, in the sweep's
// order: the points are sorted by it), the axis, the sharing rows and their policies.
struct ShareChart {
  std::string base, axis;
  bool multi = false;
  std::vector<std::string> profiles, policies;
  std::vector<ShareRow> rows;

  double x_of(const Point& p) const {
    return double(std::find(profiles.begin(), profiles.end(), p.profile) - profiles.begin());
  }
};

ShareChart share_chart(const std::vector<const Point*>& pts) {
  ShareChart c;
  c.base = file_safe(pts.front()->model);
  c.multi = multi_share_config(pts);
  for (const Point* p : pts)
    if (std::find(c.profiles.begin(), c.profiles.end(), p->profile) == c.profiles.end())
      c.profiles.push_back(p->profile);
  std::string tics;
  for (size_t i = 0; i < c.profiles.size(); ++i)
    tics += (i ? ", " : "") + gp_quote(c.profiles[i]) + " " + std::to_string(i);
  c.axis = "set xrange [-0.5:" + fixed(double(c.profiles.size()) - 0.5, 1) +
           "]\nset xtics (" + tics + ") noenhanced\n";
  c.rows = share_rows(pts);
  for (const auto& row : c.rows)
    if (std::find(c.policies.begin(), c.policies.end(), row.first->policy) == c.policies.end())
      c.policies.push_back(row.first->policy);
  std::sort(c.policies.begin(), c.policies.end(), [](const std::string& a, const std::string& b) {
    return std::pair(policy_rank(a), a) < std::pair(policy_rank(b), b);
  });
  return c;
}

// One series per (policy, want, config).
std::vector<Series> share_series(const ShareChart& c, const std::vector<ShareBar>& wants) {
  std::vector<Series> series;
  for (const auto& policy : c.policies)
    for (const auto& want : wants) {
      std::map<std::string, Series> by_title;
      std::vector<std::string> order;
      for (const auto& row : c.rows)
        for (const auto& [vms, p] : row.by_vms) {
          if (p->policy != policy || want.alone != (vms == 1)) continue;
          const auto v = want.value(*p);
          if (!v) continue;
          const std::string t = policy + ", " + vms_text(vms) +
                                (want.what.empty() ? "" : ", " + want.what) +
                                (c.multi ? batch_suffix(*p) : "");
          if (!by_title.count(t)) order.push_back(t);
          by_title[t].title = t;
          by_title[t].rows.push_back({c.x_of(*p), (*v)[0], (*v)[1]});
        }
      for (const auto& t : order) series.push_back(by_title[t]);
    }
  return series;
}

// The mean over the ok repeats of the number at `pointer`, times `scale`, with its CI.
ShareValue share_from(const char* pointer, double scale) {
  return ShareValue([pointer, scale](const Point& p) -> Pair {
    const auto m = over_repeats(p, pointer);
    if (!m) return std::nullopt;
    return std::array<double, 2>{scale * m->mean, scale * m->ci95};
  });
}

// The median img/s per VM over repeats, with its CI.
Pair share_per_vm(const Point& p) {
  if (p.per_vm.empty()) return std::nullopt;
  std::vector<double> v;
  for (const auto& x : p.per_vm) v.push_back(x.second);
  return std::array<double, 2>{median(v), mean_ci(v).ci95};
}

// `s` on one line: what a gnuplot script or a data file's comment may hold.
std::string one_gp_line(const std::string& s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7f ? ' ' : c;
  }
  return out;
}

}  // namespace

std::string gp_quote(const std::string& s) {
  // In gnuplot's single-quoted strings only '' is special (no backslash escapes, no backquote
  // or macro substitution), but a newline ends the command and the next line runs as one:
  // control characters never reach the script.
  std::string q = "'";
  for (char c : one_gp_line(s)) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

void refuse_symlink(const std::string& path) {
  std::error_code ec;
  if (fs::is_symlink(fs::symlink_status(path, ec)))
    throw Error(path + " is a symbolic link: a report writes only its own files in a results directory, "
                "never through a link (remove it, or report a copy of raw.jsonl in a directory of your own)");
}

void add_series(Plot& plot, const std::vector<Series>& series, const std::string& style) {
  for (size_t i = 0; i < series.size(); ++i) {
    plot.dat += "# " + one_gp_line(series[i].title) + "\n";
    for (const auto& r : series[i].rows)
      plot.dat += num6(r[0]) + " " + num6(r[1]) + " " + num6(r[2]) + "\n";
    plot.dat += "\n\n";
    plot.plot += plot.plot.empty() ? "plot " : ", \\\n     ";
    plot.plot += gp_quote(plot.name + ".dat") + " index " + std::to_string(i) + " using 1:2:3 with " +
                 style + " title " + gp_quote(series[i].title);
  }
}

Plotter::Plotter(const std::string& run_dir, bool wanted) : dir_(run_dir + "/plots") {
  if (!wanted) {
    note_ = "Plots skipped: turned off.";
    return;
  }
  gnuplot_ = find_on_path("gnuplot");
  if (gnuplot_.empty()) note_ = "Plots skipped: gnuplot not found (apt-get install gnuplot-nox).";
}

void Plotter::render(const Plot& p) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw Error("cannot create " + dir_ + ": " + ec.message());
  for (const char* ext : {".dat", ".gp", ".svg"}) refuse_symlink(dir_ + "/" + p.name + ext);
  write_file_atomic(dir_ + "/" + p.name + ".dat", p.dat);
  write_file_atomic(dir_ + "/" + p.name + ".gp", gp_script(p));
  write_file_atomic(dir_ + "/" + p.name + ".svg", run_gnuplot(gnuplot_, dir_, p.name + ".gp"));
}

std::string file_safe(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return s;
}

Pair throughput_value(const Point& p) {
  if (p.total.empty()) return std::nullopt;
  std::vector<double> v;
  for (const auto& t : p.total) v.push_back(t.second);
  return std::array<double, 2>{median(v), mean_ci(v).ci95};
}

std::vector<std::string> model_plots(const Run& run, const std::vector<const Point*>& pts,
                                     Plotter& plotter) {
  const std::string model = pts.front()->model, base = file_safe(model);
  std::vector<std::string> drawn;
  const auto draw = [&](const std::string& kind, const std::string& title,
                        const std::string& ylabel, const std::vector<Series>& series,
                        const std::string& setup, const std::string& extra) {
    if (series.empty()) return;
    Plot p{base + "-" + kind, title, "nodes (N, one rank each)", ylabel, nodes_axis(pts) + setup,
           "", ""};
    add_series(p, series, "yerrorlines");
    p.plot += extra;
    plotter.render(p);
    drawn.push_back(p.name);
  };
  draw("throughput", model + ": total img/s vs nodes (median over repeats, 95% CI)", "total img/s",
       model_series(run, pts, throughput_value), "set yrange [0:*]\n", "");
  const auto efficiency = model_series(run, pts, efficiency_value);
  double top = 1;  // room above the ideal line
  for (const auto& s : efficiency)
    for (const auto& r : s.rows) top = std::max(top, r[1] + r[2]);
  draw("efficiency", model + ": scaling efficiency vs nodes (mean over repeats, 95% CI)",
       "scaling efficiency", efficiency,
       "set yrange [0:" + fixed(1.15 * top, 2) + "]\n",
       ", \\\n     1 with lines dt 2 lc rgb 'gray40' title 'ideal'");
  return drawn;
}

bool busbw_plot(const Run& run, Plotter& plotter, const std::string& op, const std::string& name) {
  std::vector<Series> series;
  for (const Point* p : points_of(run, PointKind::collectives)) {
    if (p->axis("collective") != op) continue;
    Series s{p->transport + " N=" + std::to_string(p->nodes) +
                 (p->profile != "none" ? " " + p->profile : ""), {}};
    for (const auto& [bytes, st] : p->sizes)
      if (!st.busbw.empty())
        s.rows.push_back({double(bytes), median(st.busbw), mean_ci(st.busbw).ci95});
    if (!s.rows.empty()) series.push_back(s);
  }
  if (series.empty()) return false;
  Plot p{name, op + " busbw vs message size (out-of-place, median over repeats, 95% CI)",
         "message size (bytes)", "busbw (GB/s)",
         "set logscale x 2\nset format x '%.0b%BB'\nset yrange [0:*]\n", "", ""};
  add_series(p, series, "yerrorlines");
  plotter.render(p);
  return true;
}

bool time_breakdown_plot(const Run& run, Plotter& plotter) {
  const auto multi = multi_config_models(run);
  Plot p{"time-breakdown", "where a training step goes (seconds, mean over ranks and repeats)", "",
         "seconds per step",
         "set style data histograms\nset style histogram rowstacked\n"
         "set style fill solid 0.85 border -1\nset boxwidth 0.7\n"
         "set xtics rotate by -30 left noenhanced\nset yrange [0:*]\n",
         "plot 'time-breakdown.dat' using 2:xtic(1) title 'compute', '' using 3 title 'exposed comm', "
         "'' using 4 title 'optimizer'",
         "# point compute_s exposed_s optimizer_s\n"};
  bool any = false;
  for (const Point* pt : points_of(run, PointKind::train)) {
    if (!pt->compute_s || !pt->exposed_s || !pt->optimizer_s) continue;
    std::string l = one_gp_line(label(*pt, multi.count(pt->model) > 0));
    std::replace(l.begin(), l.end(), '"', '\'');
    p.dat += "\"" + l + "\" " + num6(*pt->compute_s) + " " + num6(*pt->exposed_s) + " " +
             num6(*pt->optimizer_s) + "\n";
    any = true;
  }
  if (any) plotter.render(p);
  return any;
}

std::string share_bar_chart(const std::vector<const Point*>& pts, const std::string& kind, const std::string& title,
                            const std::string& ylabel, const std::vector<ShareBar>& bars, const std::string& yrange,
                            Plotter& plotter) {
  const ShareChart chart = share_chart(pts);
  std::vector<Series> series = share_series(chart, bars);
  if (series.empty()) return "";
  const double width = 0.8 / double(series.size());
  for (size_t i = 0; i < series.size(); ++i)
    for (auto& r : series[i].rows) r[0] += (double(i) - double(series.size() - 1) / 2) * width;
  Plot p{chart.base + "-" + kind, title, "vGPU profile", ylabel,
         chart.axis +
             "set key below noenhanced\nset style fill solid 0.8 border -1\nset boxwidth " +
             num6(width) + " absolute\nset yrange " + yrange + "\n",
         "", ""};
  add_series(p, series, "boxerrorbars");
  plotter.render(p);
  return p.name;
}

std::vector<std::string> share_plots(const std::vector<const Point*>& pts, Plotter& plotter) {
  const std::string model = pts.front()->model;
  std::vector<std::string> drawn;
  const auto draw = [&](const std::string& kind, const std::string& title, const std::string& ylabel,
                        const std::vector<ShareBar>& bars, const std::string& yrange) {
    const std::string name = share_bar_chart(pts, kind, title, ylabel, bars, yrange, plotter);
    if (!name.empty()) drawn.push_back(name);
  };
  const ShareValue per_vm = share_per_vm;
  draw("share-step-time", model + ": step time, 1 VM alone and k VMs on one device (mean, 95% CI)",
       "seconds per step (mean over VMs)",
       {{true, "", share_from("/share/summary/step_s", 1)},
        {false, "", share_from("/share/summary/step_s", 1)}},
       "[0:*]");
  draw("share-utilization", model + ": device utilization, 1 VM alone and k VMs (mean, 95% CI)",
       "device utilization (%)",
       {{true, "per VM", share_from("/share/summary/device_util_per_vm", 100)},
        {false, "device total", share_from("/share/summary/device_util_total", 100)}},
       "[0:110]");
  draw("share-throughput", model + ": img/s per VM, 1 VM alone and k VMs (median, 95% CI)",
       "img/s per VM", {{true, "", per_vm}, {false, "", per_vm}},
       "[0:*]");
  return drawn;
}

}  // namespace ringbench::report
