// The "Remote GPU" section (remote points, runner/sweep/remote_sweep.h): VMware's Bitfusion
// setups side by side, each normalised to the same training on the device itself, with the
// traffic per step and predict's remote model (runner/predict/remote_model.h) beside them.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "runner/predict/remote_model.h"
#include "runner/analysis/format.h"
#include "runner/analysis/plots.h"
#include "runner/report/sections.h"
#include "runner/record/json_fields.h"

namespace ringbench::report {
namespace {

std::string num_text(double v) { return num6(v); }

// The traffic per step a record's first client counted (null for the local device).
std::optional<predict::RemoteTraffic> traffic_of(const Point& p) {
  for (const Record* r : p.ok()) {
    const auto up = number_at(r->j, "/remote/per_step/sent_bytes");
    const auto down = number_at(r->j, "/remote/per_step/received_bytes");
    const auto trips = number_at(r->j, "/remote/per_step/round_trips");
    if (up && down && trips) return predict::RemoteTraffic{*up, *down, *trips};
  }
  return std::nullopt;
}

std::string setup_text(const Point& p) {
  if (p.setup == "local_device") return "local device (no server)";
  if (p.setup == "loopback") return "local: client and server on the device's node";
  if (p.setup == "partial") return "local partials: " + std::to_string(p.clients) + " clients, 1/" +
                                   std::to_string(p.clients) + " each";
  return "remote: client on another node";
}

std::string link_text(const Point& p) {
  if (p.setup == "local_device") return "-";
  if (p.setup != "link") return p.transport + ", loopback";
  return p.transport + ", " + (p.link_gbps > 0 ? num_text(p.link_gbps) + " Gbit/s" : "unshaped") + ", " +
         num_text(p.latency_us) + " us";
}

// "12.3 (11.9..12.8)": the median over repeats and their range.
std::string median_range(const std::vector<double>& v, int decimals) {
  if (v.empty()) return "-";
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  if (v.size() < 2) return fixed(v.front(), decimals);
  return fixed(median(v), decimals) + " (" + fixed(*lo, decimals) + ".." + fixed(*hi, decimals) + ")";
}

// "75% (73..78%)": percentages' median and range.
std::string percent_range(const std::vector<double>& v) {
  if (v.empty()) return "-";
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return fixed(median(v), 0) + "%" + (v.size() < 2 ? "" : " (" + fixed(*lo, 0) + ".." + fixed(*hi, 0) + "%)");
}

std::vector<double> values(const std::map<int, double>& m) {
  std::vector<double> v;
  for (const auto& kv : m) v.push_back(kv.second);
  return v;
}

// The step a base point's img/s measures (a batch per step per client) and the device's backward
// pass (the local device's: a client's own includes its waits for the device).
std::optional<predict::RemoteStep> base_step(const Point* base, const Point* local) {
  if (!base || base->total.empty() || !local) return std::nullopt;
  const double img_s = median(values(base->total)) / std::max(1, base->clients);
  std::vector<double> backward;
  for (const Record* r : local->ok())
    if (auto b = number_at(r->j, "/remote/summary/backward_s")) backward.push_back(*b);
  if (img_s <= 0) return std::nullopt;
  return predict::RemoteStep{base->batch / img_s, backward.empty() ? 0 : median(backward)};
}

// p's predicted img/s from `base` (the local device or loopback): the device time-sliced among
// the clients keeps the base's total; a link adds its transfer terms.
std::optional<double> predicted_img_s(const Point& p, const Point* base, const Point* local) {
  const auto step = base_step(base, local);
  if (!step || &p == base || p.setup == "local_device") return std::nullopt;
  const double base_img_s = median(values(base->total));
  if (p.setup != "link") return base_img_s;
  const auto t = traffic_of(p);
  if (!t) return std::nullopt;
  return base_img_s * predict::remote_kept(*step, *t, {p.link_gbps, p.latency_us});
}

// "74.28 (+1%)": a prediction and how far the measured median lies from it.
std::string prediction_text(const Point& p, const Point* base, const Point* local) {
  const auto pred = predicted_img_s(p, base, local);
  if (!pred || *pred <= 0) return "-";
  const double dev = 100 * (median(values(p.total)) / *pred - 1);
  return fixed(*pred, 2) + " (" + (dev >= 0.5 ? "+" : "") + fixed(dev, 0) + "%)";
}

std::vector<std::string> row(const Point& p, const Point* local, const Point* loopback) {
  std::vector<std::string> r = {setup_text(p), p.clients ? std::to_string(p.clients) : "-", link_text(p)};
  if (p.total.empty()) {
    const std::string why = not_ok_text(p) + (p.repeats.empty() ? "" : ": " + one_line(p.repeats.front().error));
    r.insert(r.end(), {why, "", "", "", "", ""});
    return r;
  }
  r.push_back(median_range(values(p.total), 2));
  r.push_back(local && !local->total.empty() ? percent_range(paired(p.total, local->total, 0.01)) : "-");
  r.push_back(prediction_text(p, local, local));
  r.push_back(prediction_text(p, loopback, local));
  const auto t = traffic_of(p);
  r.push_back(t ? fixed(t->bytes_up / 1e6, 2) + " / " + fixed(t->bytes_down / 1e6, 2) : "-");
  r.push_back(t ? fixed(t->round_trips, 0) : "-");
  return r;
}

// What stood in for the GPU, from the first record that names the server's device.
std::string device_line(const std::vector<const Point*>& pts) {
  for (const Point* p : pts)
    for (const Record* r : p->ok())
      if (const json* d = find_at(r->j, "/remote/device"); d && d->is_object()) {
        const bool emulated = bool_or(*d, "emulated", true);
        return "The device server's device: " + one_line(str_or(*d, "device", "?")) + " (" +
               one_line(str_or(*d, "backend", "?")) + ", " + std::to_string(int_or(*d, "threads", 0)) + " thread(s))" +
               (emulated ? ", **EMULATED**" : "") + "; time shared " + one_line(str_or(*d, "policy", "?")) +
               " among the clients.\n\n";
      }
  return "";
}

// The link points that keep less than `fraction` of local (by their median ratio).
std::string below_text(const std::vector<const Point*>& group, const Point* local, double fraction) {
  std::string below;
  bool any = false;
  for (const Point* p : group) {
    if (p->setup != "link" || p->total.empty() || !local || local->total.empty()) continue;
    any = true;
    if (median(paired(p->total, local->total, 1)) < fraction) below += (below.empty() ? "" : "; ") + link_text(*p);
  }
  if (!any) return "";
  return "Below " + fixed(100 * fraction, 0) + "% of local: " + (below.empty() ? "none of the links measured" : below) +
         ".\n";
}

std::map<std::tuple<std::string, int, int>, std::vector<const Point*>> by_model(const std::vector<const Point*>& pts) {
  std::map<std::tuple<std::string, int, int>, std::vector<const Point*>> groups;
  for (const Point* p : pts) groups[{p->model, p->batch, p->image_size}].push_back(p);
  const auto setup_rank = [](const Point* p) {
    return std::find(kRemoteSetups.begin(), kRemoteSetups.end(), p->setup) - kRemoteSetups.begin();
  };
  for (auto& [key, g] : groups)  // the study's order: local device, local, partials, links fastest first
    std::sort(g.begin(), g.end(), [&](const Point* a, const Point* b) {
      return std::tuple(setup_rank(a), a->clients, transport_rank(a->transport), -a->link_gbps, a->latency_us) <
             std::tuple(setup_rank(b), b->clients, transport_rank(b->transport), -b->link_gbps, b->latency_us);
    });
  return groups;
}

// Kept share of local against the link rate, a line per one-way latency (tcp links with a rate):
// measured (median over repeats, its range as the error bar) and predicted from the loopback base.
std::string remote_plot(const std::vector<const Point*>& group, const Point* local, const Point* loopback,
                        const std::string& name, Plotter& plotter) {
  if (!plotter.enabled() || !local || local->total.empty()) return "";
  std::map<double, Series> measured, predicted;
  for (const Point* p : group) {
    if (p->setup != "link" || p->link_gbps <= 0 || p->total.empty() || p->transport != "tcp") continue;
    const std::vector<double> kept = paired(p->total, local->total, 0.01);
    const auto [lo, hi] = std::minmax_element(kept.begin(), kept.end());
    Series& m = measured[p->latency_us];
    m.title = "measured, " + num_text(p->latency_us) + " us";
    m.rows.push_back({p->link_gbps, median(kept), (*hi - *lo) / 2});
    if (const auto pred = predicted_img_s(*p, loopback, local)) {
      Series& q = predicted[p->latency_us];
      q.title = "predicted (loopback + link), " + num_text(p->latency_us) + " us";
      q.rows.push_back({p->link_gbps, 100 * *pred / median(values(local->total)), 0});
    }
  }
  if (measured.empty()) return "";
  Plot plot{name, "remote training: % of local img/s against the device link's rate",
            "device link (Gbit/s)", "% of local img/s", "", "", ""};
  std::vector<Series> m, q;
  for (auto& [lat, series] : measured) std::sort(series.rows.begin(), series.rows.end()), m.push_back(series);
  for (auto& [lat, series] : predicted) std::sort(series.rows.begin(), series.rows.end()), q.push_back(series);
  add_series(plot, m, "yerrorlines pt 7");
  // The predicted blocks follow the measured ones in the same data file.
  for (size_t i = 0; i < q.size(); ++i) {
    plot.dat += "# " + q[i].title + "\n";
    for (const auto& r : q[i].rows) plot.dat += num6(r[0]) + " " + num6(r[1]) + " " + num6(r[2]) + "\n";
    plot.dat += "\n\n";
    plot.plot += ", \\\n     " + gp_quote(name + ".dat") + " index " + std::to_string(m.size() + i) +
                 " using 1:2 with points pt 6 title " + gp_quote(q[i].title);
  }
  plot.plot += ", \\\n     90 with lines dt 2 lc rgb 'gray40' title '90%', \\\n     50 with lines dt 3 lc rgb 'gray60' title '50%'";
  double lo = 1e9, hi = 0;
  for (const auto& series : m)
    for (const auto& r : series.rows) lo = std::min(lo, r[0]), hi = std::max(hi, r[0]);
  plot.setup = "set key inside top left Left reverse noenhanced font ',9'\nset logscale x\nset xrange [" + num6(lo / 1.5) + ":" +
               num6(hi * 1.5) + "]\nset yrange [0:*]\n";
  plotter.render(plot);
  return image("training img/s through the remote device against the link rate", name);
}

const char* kIntro =
    "VMware's Bitfusion benchmark (issue 41): one training job through `ringbench device-server` in the "
    "setups of their study, each against the same training on the device itself (\"local device\": "
    "`train --device cpu` on the device's node). *of local*: img/s (summed over the clients) / the local "
    "device's, by repeat: median (min..max). *predicted*: predict's remote model (runner/predict/remote_model.h) "
    "from a base step without the link, the local device's or the loopback point's (the device server's own "
    "costs included), plus bytes up / link rate, what of bytes down / link rate outlasts the local device's "
    "backward pass (the gradients stream down as backward makes them), and round trips x 2 x one-way latency; "
    "partials keep the base's total; in brackets the measured median's deviation from it. "
    "The link's latency and rate are the device server's user-space shaping proxy (this kernel has no "
    "netem), whose own forwarding adds ~85 us per round trip on a loaded 2-core host.\n\n";

}  // namespace

std::string md_remote(const Run& run, Plotter& plotter) {
  const std::vector<const Point*> pts = points_of(run, PointKind::remote);
  if (pts.empty()) return "";
  std::string md = "## Remote GPU\n\n" + std::string(kIntro) + device_line(pts);
  for (const auto& [key, group] : by_model(pts)) {
    const Point *local = nullptr, *loopback = nullptr;
    for (const Point* p : group) {
      if (p->setup == "local_device") local = p;
      if (p->setup == "loopback") loopback = p;
    }
    const auto& [model, batch, size] = key;
    md += "### " + model + " b" + std::to_string(batch) + (size ? " " + std::to_string(size) + "px" : "") + "\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const Point* p : group) rows.push_back(row(*p, local, loopback));
    md += md_table({"setup", "clients", "link", "img/s", "of local", "predicted: local + link",
                    "predicted: loopback + link", "MB up / down per step", "round trips per step"},
                   "llrrrrrrr", rows);
    md += "\n" + below_text(group, local, 0.9) + below_text(group, local, 0.5) + "\n";
    const std::string plot = remote_plot(group, local, loopback, "remote-" + file_safe(model + "-b" + std::to_string(batch) +
                                                                                     (size ? "-s" + std::to_string(size) : "")),
                                         plotter);
    md += plot;
  }
  return md;
}

}  // namespace ringbench::report
