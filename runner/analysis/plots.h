// The report's plots: a gnuplot script and its data beside each SVG in RUN_DIR/plots, so users
// can tweak them.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runner/analysis/run.h"

namespace ringbench::report {

struct Plot {
  std::string name, title, xlabel, ylabel, setup, plot, dat;
};

// Renders plots/NAME.svg (with NAME.dat and NAME.gp) with gnuplot; disabled, with a note, when
// plots are turned off or gnuplot is not found.
class Plotter {
 public:
  Plotter(const std::string& run_dir, bool wanted);
  bool enabled() const { return note_.empty(); }
  const std::string& note() const { return note_; }

  void render(const Plot& p);

 private:
  std::string dir_, gnuplot_, note_;
};

struct Series {
  std::string title;
  std::vector<std::array<double, 3>> rows;  // x, y, error
};

// Data blocks of `series` (gnuplot's `index`) and the plot clauses that draw them.
void add_series(Plot& plot, const std::vector<Series>& series, const std::string& style);

// A results directory may come from anyone: the report writes its files there, never through a
// symbolic link (summary.csv -> /etc/passwd, plots -> /etc). Throws Error naming `path` if it
// is one.
void refuse_symlink(const std::string& path);

// A gnuplot string literal: on one line (control characters become spaces), ' doubled.
std::string gp_quote(const std::string& s);

// A file name made of the model's name (letters, digits, '-', '_', '.').
std::string file_safe(std::string s);

using Pair = std::optional<std::array<double, 2>>;

// A train or share point's median total img/s over repeats and its CI.
Pair throughput_value(const Point& p);

// The plots of one model; returns the names of those drawn.
std::vector<std::string> model_plots(const Run& run, const std::vector<const Point*>& pts,
                                     Plotter& plotter);

// busbw vs message size of every collectives point of collective `op`, as plots/<name>.svg;
// false when there is nothing to plot.
bool busbw_plot(const Run& run, Plotter& plotter, const std::string& op, const std::string& name);

// Compute, exposed comm and optimizer per step of every train point; false when there is
// nothing to plot.
bool time_breakdown_plot(const Run& run, Plotter& plotter);

// The sharing plots of one model: categories (the x axis) are the profiles in the sweep's
// order, one bar per series side by side in each.
std::vector<std::string> share_plots(const std::vector<const Point*>& pts, Plotter& plotter);

// A point's [y, error] in a sharing chart, or nothing (no bar).
using ShareValue = std::function<Pair(const Point&)>;
struct ShareBar {
  bool alone;        // the 1 VM points, else those with k VMs
  std::string what;  // added to the series' title
  ShareValue value;
};

// One bar chart of one model's sharing points (train's share points, or infer points with VMs)
// by profile: per policy and bar, the points' values side by side, in plots/<model>-<kind>.svg.
// Returns the plot's name ("" when no point has a value).
std::string share_bar_chart(const std::vector<const Point*>& pts, const std::string& kind, const std::string& title,
                            const std::string& ylabel, const std::vector<ShareBar>& bars, const std::string& yrange,
                            Plotter& plotter);

}  // namespace ringbench::report
