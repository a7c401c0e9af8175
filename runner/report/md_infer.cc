// report.md's Inference section: `ringbench infer` points (MLPerf LoadGen's scenarios), one
// subsection per point with its Offline, SingleStream and Server tables, a throughput-against-
// batch plot per model, and MobileNet v1 against Inception v3.
#include <algorithm>
#include <map>
#include <optional>

#include "models/layer_profile.h"
#include "models/zoo.h"
#include "runner/analysis/format.h"
#include "runner/report/infer_views.h"
#include "runner/report/md_groups.h"
#include "runner/report/sections.h"
#include "runner/record/json_fields.h"

namespace ringbench::report {
namespace {

// The infer points of processes serving alone (no scheduler), under any profile; those with VMs
// are md_infer_vgpu's.
std::vector<const Point*> alone_points(const Run& run) {
  std::vector<const Point*> out;
  for (const Point* p : points_of(run, PointKind::infer))
    if (!p->shared()) out.push_back(p);
  return out;
}

std::string ms(const std::vector<double>& seconds) { return seconds.empty() ? "-" : fixed(median(seconds) * 1e3, 2); }
std::string rate(const std::vector<double>& v) { return v.empty() ? "-" : fixed(median(v), 1); }

struct OfflineRow {
  std::vector<double> samples_per_s;
  Validity validity;
};

// Offline samples/s by batch over the ok repeats.
std::map<int, OfflineRow> offline_rows(const Point& p) {
  std::map<int, OfflineRow> rows;
  for (const Record* r : p.ok()) {
    const json* offline = find_at(r->j, "/infer/offline");
    if (!offline || !offline->is_array()) continue;
    for (const auto& row : *offline) {
      const auto sps = number_at(row, "/samples_per_s");
      if (!sps) continue;
      OfflineRow& o = rows[int_or(row, "batch", 0)];
      o.samples_per_s.push_back(*sps);
      o.validity.add(row);
    }
  }
  return rows;
}

std::string offline_table(const Point& p) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& [batch, o] : offline_rows(p))
    rows.push_back({std::to_string(batch), rate(o.samples_per_s), o.validity.text()});
  if (rows.empty()) return "";
  return "Offline, samples/s against batch:\n\n" + md_table({"batch", "samples/s", "LoadGen"}, "rrl", rows);
}

std::string single_stream_table(const Point& p) {
  std::vector<double> p50, p90, p99, qps;
  Validity v;
  for (const Record* r : p.ok()) {
    const json* s = find_at(r->j, "/infer/single_stream");
    if (!s) continue;
    const std::pair<const char*, std::vector<double>*> fields[] = {
        {"/latency/p50_s", &p50}, {"/latency/p90_s", &p90}, {"/latency/p99_s", &p99}, {"/qps", &qps}};
    for (const auto& [at, into] : fields)
      if (auto x = number_at(*s, at)) into->push_back(*x);
    v.add(*s);
  }
  if (p90.empty()) return "";
  return "SingleStream, one query at a time (LoadGen's metric is p90):\n\n" +
         md_table({"p50 ms", "p90 ms", "p99 ms", "QPS", "LoadGen"}, "rrrrl",
                  {{ms(p50), ms(p90), ms(p99), rate(qps), v.text()}});
}

// The Server search's peak (or its one run) of every ok repeat.
struct ServerSummary {
  std::vector<double> qps, p99_s, missed_qps, bound_ms;
  size_t runs = 0, not_found = 0;
  bool search = false;
  Validity validity;
};

ServerSummary server_summary(const Point& p) {
  ServerSummary s;
  for (const Record* r : p.ok()) {
    const json* server = find_at(r->j, "/infer/server");
    if (!server || !server->is_object()) continue;
    const json* result = nullptr;
    if (const json* tries = find_at(*server, "/tries"); tries && tries->is_array()) {
      s.search = true;
      s.runs += tries->size();
      const auto peak = number_at(*server, "/peak_qps");
      if (!bool_or(*server, "found", false) || !peak) {
        ++s.not_found;
        continue;
      }
      s.qps.push_back(*peak);
      if (auto up = number_at(*server, "/upper_qps"); up && *up > 0) s.missed_qps.push_back(*up);
      for (const auto& t : *tries)
        if (number_at(t, "/qps") == peak) result = find_at(t, "/result");
    } else if (const json* runs = find_at(*server, "/runs"); runs && runs->is_array() && !runs->empty()) {
      s.runs += runs->size();
      result = &(*runs)[0];
      if (auto q = number_at(*result, "/completed_qps")) s.qps.push_back(*q);
    }
    if (!result) continue;
    if (auto x = number_at(*result, "/tail_latency_s")) s.p99_s.push_back(*x);
    if (auto x = number_at(*result, "/latency_bound_s")) s.bound_ms.push_back(*x * 1e3);
    s.validity.add(*result);
  }
  return s;
}

std::string server_table(const Point& p) {
  const ServerSummary s = server_summary(p);
  if (s.runs == 0) return "";
  const std::string bound = s.bound_ms.empty() ? "the bound" : fixed(median(s.bound_ms), 1) + " ms";
  const std::string none =
      s.not_found ? " No rate met the bound in " + std::to_string(s.not_found) + " of the repeats." : "";
  if (!s.search)
    return "Server at one rate, p99 bound " + bound + ":\n\n" +
           md_table({"completed QPS", "p99 ms", "runs", "LoadGen"}, "rrrl",
                    {{rate(s.qps), ms(s.p99_s), std::to_string(s.runs), s.validity.text()}});
  return "Server, the highest QPS whose p99 is within " + bound + " (Poisson arrivals, dynamic batching):" + none +
         "\n\n" +
         md_table({"peak QPS", "p99 ms at the peak", "missed at QPS", "runs", "LoadGen at the peak"}, "rrrrl",
                  {{rate(s.qps), ms(s.p99_s), rate(s.missed_qps), std::to_string(s.runs),
                    s.qps.empty() ? "-" : s.validity.text()}});
}

std::string point_title(const Point& p) {
  return p.model + (p.image_size ? " " + std::to_string(p.image_size) + "px" : "") + ", batches up to " +
         std::to_string(p.batch) + (p.profile != "none" ? ", " + p.profile : "");
}

std::string point_text(const Point& p) {
  std::string md = "### " + point_title(p) + " (" + p.id + ")\n\n";
  const auto ok = p.ok();
  if (ok.empty()) return md + "No results: " + not_ok_text(p) + " (see the failed and skipped points).\n\n";
  const json* found = find_at(ok.front()->j, "/infer/meta");
  const json meta = found && found->is_object() ? *found : json::object();
  md += "Input " + str_or(meta, "input", "?") + ", backend " + str_or(meta, "backend", "?") + " on " +
        str_or(meta, "device", "?") + ", " + std::to_string(int_or(meta, "threads", 0)) + " thread(s); " +
        std::to_string(ok.size()) + " ok repeat(s) of " + std::to_string(p.repeats.size()) + ".\n\n";
  for (const std::string& t : {offline_table(p), single_stream_table(p), server_table(p)}) md += t;
  return md;
}

// Offline samples/s against batch, one series per point of the model.
std::string throughput_plot(const std::vector<const Point*>& pts, Plotter& plotter) {
  std::vector<Series> series;
  for (const Point* p : pts) {
    Series s{point_title(*p), {}};
    for (const auto& [batch, o] : offline_rows(*p))
      s.rows.push_back({double(batch), median(o.samples_per_s), mean_ci(o.samples_per_s).ci95});
    if (!s.rows.empty()) series.push_back(s);
  }
  if (series.empty() || !plotter.enabled()) return "";
  Plot plot{"infer-" + file_safe(pts.front()->model), pts.front()->model + ": Offline throughput against batch",
            "batch (samples)", "samples/s (median over repeats)", "set logscale x 2\nset yrange [0:*]\n", "", ""};
  add_series(plot, series, "yerrorlines");
  plotter.render(plot);
  return image(pts.front()->model + " Offline samples/s against batch", plot.name);
}

// Multiply-adds of one image's forward pass, from the model's graph.
double graph_macs(const std::string& model, int image_size) {
  const models::Graph g = models::build_model(model, {.image_size = image_size});
  double flops = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) flops += models::forward_flops(g, int(i), 1);
  return flops / 2;
}

std::string size_text(const Point& p) { return p.image_size ? std::to_string(p.image_size) + "px" : "default size"; }

// MobileNet v1 against Inception v3 at every batch both were measured at, per pair of points:
// the table's rows and the plot's series (throughput ratio against batch; the MAC ratio of the
// sizes run as a flat line).
struct Ratios {
  std::vector<std::vector<std::string>> rows;
  std::vector<Series> series, macs;
};

std::optional<double> mac_ratio(const Point& mobilenet, const Point& inception) {
  try {
    return graph_macs("inception_v3", inception.image_size) / graph_macs("mobilenet_v1", mobilenet.image_size);
  } catch (const std::exception&) {
    return std::nullopt;  // a size no graph of this ringbench builds
  }
}

void add_pair(Ratios& out, const Point& m, const Point& i) {
  const auto mo = offline_rows(m);
  const auto macs = mac_ratio(m, i);
  const std::string profile = m.profile != "none" ? ", " + m.profile : "";
  const std::string title = "MobileNet v1 " + size_text(m) + " / Inception v3 " + size_text(i) + profile;
  Series ratio{title, {}}, flat{"MAC ratio, " + size_text(i) + " / " + size_text(m), {}};
  for (const auto& [batch, io] : offline_rows(i)) {
    const auto it = mo.find(batch);
    if (it == mo.end() || median(io.samples_per_s) <= 0) continue;
    const double mr = median(it->second.samples_per_s), ir = median(io.samples_per_s);
    out.rows.push_back({std::to_string(batch) + profile, size_text(m), fixed(mr, 1), size_text(i), fixed(ir, 1),
                        fixed(mr / ir, 2) + "×", macs ? fixed(*macs, 2) + "×" : "-"});
    ratio.rows.push_back({double(batch), mr / ir, 0});
    if (macs) flat.rows.push_back({double(batch), *macs, 0});
  }
  if (!ratio.rows.empty()) out.series.push_back(ratio);
  if (!flat.rows.empty()) out.macs.push_back(flat);
}

std::string ratio_plot(const Ratios& r, Plotter& plotter) {
  if (!plotter.enabled()) return "";
  Plot plot{"infer-mobilenet-vs-inception", "MobileNet v1 / Inception v3 Offline throughput against their MAC ratio",
            "batch (samples)", "ratio", "set logscale x 2\nset yrange [0:*]\n", "", ""};
  std::vector<Series> all = r.series;
  all.insert(all.end(), r.macs.begin(), r.macs.end());
  add_series(plot, all, "linespoints");
  plot.plot += ", \\\n     8.8 with lines dashtype 2 title 'published MAC ratio at full size (8.8)'";
  plotter.render(plot);
  return image("MobileNet v1 / Inception v3 Offline throughput against their MAC ratio", plot.name);
}

std::string ratio_text(const Run& run, Plotter& plotter) {
  Ratios r;
  for (const Point* m : alone_points(run))
    for (const Point* i : alone_points(run))
      if (m->model == "mobilenet_v1" && i->model == "inception_v3" && m->profile == i->profile) add_pair(r, *m, *i);
  if (r.rows.empty()) return "";
  const double inception = graph_macs("inception_v3", 0), mobilenet = graph_macs("mobilenet_v1", 0);
  return "### MobileNet v1 against Inception v3\n\n"
         "Offline throughput at the same batch: MobileNet v1's samples/s over Inception v3's, next to the "
         "ratio of their multiply-adds per image (Inception v3's over MobileNet v1's), counted from the "
         "models' graphs (convolutions and fully connected layers) at the image sizes run. At their full sizes "
         "(299 and 224 px) the graphs count " + fixed(inception / 1e6, 0) + "M and " + fixed(mobilenet / 1e6, 0) +
         "M MACs: " + fixed(inception / mobilenet, 2) + "× (the published figures: about 5,000M and 569M, 8.8×). "
         "A throughput ratio below the MAC ratio means MobileNet's depthwise convolutions run at a lower "
         "arithmetic rate than Inception's dense ones.\n\n" +
         md_table({"batch", "MobileNet v1", "samples/s", "Inception v3", "samples/s", "throughput ratio", "MAC ratio"},
                  "rlrlrrr", r.rows) +
         ratio_plot(r, plotter);
}

}  // namespace

std::string md_infer(const Run& run, Plotter& plotter) {
  const auto pts = alone_points(run);
  if (points_of(run, PointKind::infer).empty()) return "";
  std::string md =
      "## Inference\n\n`ringbench infer` runs, as MLPerf Inference's LoadGen measures a system: Offline "
      "samples/s against batch, SingleStream latency percentiles, and the Server scenario's highest QPS "
      "whose p99 latency meets the bound. Medians over the ok repeats. LoadGen's verdict is given for every "
      "scenario: its rules ask for runs of at least 600 s and a minimum number of queries, so a sweep's "
      "short runs are INVALID under them (a measurement, not a result LoadGen would accept), with what fell "
      "short.\n\n";
  for (const auto& model : by_model(pts)) {
    for (const Point* p : model) md += point_text(*p);
    md += throughput_plot(model, plotter);
  }
  return md + ratio_text(run, plotter) + md_infer_vgpu(run, plotter);
}

}  // namespace ringbench::report
