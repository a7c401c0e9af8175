// report.md's "Tuning" section (a sweep's `tuned: true`): per tuned point and repeat, the setting
// `train --autotune` chose, the model's prediction for it, what the point then measured, and the
// search's own gain of the choice over train's defaults. "" for a run without tuned points, so
// other reports do not change.
#include <string>
#include <vector>

#include "base/errors.h"
#include "runner/analysis/format.h"
#include "runner/report/sections.h"
#include "runner/record/axes.h"

namespace ringbench::report {
namespace {

// The chosen setting, each value checked against its axis (records are untrusted):
// "wire fp16, fusion MiB 4, first bucket MiB 1, segment 1M".
std::string chosen_text(const json& chosen, const Record& r) {
  std::string s;
  for (const Axis& a : sweep_axes()) {
    if (!a.tuned) continue;
    const std::string where = "raw.jsonl point " + r.point + " repeat " + std::to_string(r.repeat) + " autotune";
    if (!chosen.contains(a.key)) throw Error(where + ": no chosen " + a.key);
    s += (s.empty() ? "" : ", ") + a.label + axis_from_json(a, chosen[a.key], where);
  }
  return s;
}

std::string knob_names() {
  std::string s;
  for (const Axis& a : sweep_axes())
    if (a.tuned) s += (s.empty() ? "" : ", ") + a.key;
  return s;
}

std::vector<std::string> row(const Point& p, const Record& r, const json& at) {
  const auto predicted = number_at(at, "/predicted_img_s"), defaults = number_at(at, "/defaults_img_s_median");
  const auto gain = number_at(at, "/speedup_over_defaults"), wall = number_at(at, "/wall_s");
  const auto steps = number_at(at, "/steps");
  const auto measured = p.total.find(r.repeat);
  const json* chosen = find_at(at, "/chosen");
  return {label(p, true), std::to_string(r.repeat), chosen && chosen->is_object() ? chosen_text(*chosen, r) : "-",
          fixed(predicted, 1), measured == p.total.end() ? "-" : fixed(measured->second, 1), fixed(defaults, 1),
          gain ? fixed(*gain, 3) + "x" : "-",
          fixed(wall, 1) + (steps ? " (" + std::to_string(int64_t(*steps)) + ")" : "")};
}

}  // namespace

std::string md_tuning(const Run& run) {
  std::vector<std::vector<std::string>> rows;
  for (const Point& p : run.points)
    for (const Record* r : p.ok())
      if (const json* at = find_at(r->j, "/train/meta/autotune"); at && at->is_object()) rows.push_back(row(p, *r, *at));
  if (rows.empty()) return "";
  return "## Tuning\n\nThe sweep asked for `tuned: true`: each train point of our ring at N >= 2 ran `train --autotune` "
         "before its measured steps (a probe, the ring's alpha-beta fit, the issue's grid ranked by the step model, "
         "the best predicted and train's defaults measured alternately; docs/tuning.md), and measured on the "
         "setting it chose. Per repeat: the choice (of " + knob_names() + "), the model's img/s for it, the img/s the "
         "point then measured, the defaults' img/s in the search (median of its samples) and the choice's gain "
         "over them (medians of the search's alternating samples), and the search's wall time and steps.\n\n" +
         md_table({"point", "repeat", "chosen", "predicted img/s", "measured img/s", "defaults img/s (search)",
                   "gain over defaults", "search s (steps)"},
                  "lrlrrrrr", rows);
}

}  // namespace ringbench::report
