#include "runner/predict/remote_whatif.h"

#include <algorithm>
#include <cmath>

#include "base/errors.h"
#include "runner/analysis/format.h"
#include "runner/analysis/run.h"
#include "runner/record/yaml_reader.h"

namespace ringbench::predict {
namespace {

template <class T, class F>
std::vector<T> read_entries(const YamlReader& r, const std::string& k, F read_one) {
  const YAML::Node v = r.at(k);
  if (!v || !v.IsSequence() || v.size() == 0) r.fail(r.key(k), "must be a non-empty list");
  std::vector<T> out;
  for (size_t i = 0; i < v.size(); ++i)
    out.push_back(read_one(YamlReader(v[i], r.key(k) + "[" + std::to_string(i) + "]", r.origin())));
  return out;
}

RemoteWhatIfModel read_model(const YamlReader& r) {
  r.only({"model", "batch", "step_s", "backward_share", "input_bytes"});
  RemoteWhatIfModel m;
  r.get("model", m.model, "a string");
  if (m.model.empty()) r.fail(r.key("model"), "missing");
  r.get_int("batch", m.batch, 1, kMaxBatch);
  m.step_s = read_sourced(r, "step_s", 1e-9, 1e6);
  m.backward_share = read_sourced(r, "backward_share", 0, 1);
  m.input_bytes = read_sourced(r, "input_bytes", 0, 1e12);
  return m;
}

RemoteWhatIfServer read_server(const YamlReader& r) {
  r.only({"name", "models"});
  RemoteWhatIfServer s;
  r.get("name", s.name, "a string");
  if (s.name.empty()) r.fail(r.key("name"), "missing");
  s.models = read_entries<RemoteWhatIfModel>(r, "models", read_model);
  return s;
}

RemoteWhatIfTransport read_transport(const YamlReader& r) {
  r.only({"name", "efficiency", "latency_us"});
  RemoteWhatIfTransport t;
  r.get("name", t.name, "a string");
  if (t.name.empty()) r.fail(r.key("name"), "missing");
  t.efficiency = read_sourced(r, "efficiency", 1e-3, 1);
  t.latency_us = read_sourced(r, "latency_us", 0, 1e6);
  return t;
}

RemoteWhatIf parse_root(const YAML::Node& node, const std::string& origin) {
  YamlReader root(node, "", origin);
  root.only({"name", "description", "remote"});
  RemoteWhatIf w;
  w.origin = origin;
  root.get("name", w.name, "a string");
  if (w.name.empty()) root.fail("name", "missing");
  root.get("description", w.description, "a string");
  YamlReader r(root.at("remote"), "remote", origin);
  r.only({"keep", "servers", "transports", "grid"});
  r.get_double("keep", w.keep, 0.01, 0.999);
  w.servers = read_entries<RemoteWhatIfServer>(r, "servers", read_server);
  w.transports = read_entries<RemoteWhatIfTransport>(r, "transports", read_transport);
  if (r.has("grid")) {
    YamlReader g(r.at("grid"), r.key("grid"), origin);
    g.only({"link_gbps", "latency_us"});
    if (g.has("link_gbps")) w.grid_link_gbps = g.list<double>("link_gbps", "positive numbers");
    if (g.has("latency_us")) w.grid_latency_us = g.list<double>("latency_us", "numbers");
    for (double x : w.grid_link_gbps) g.check_range("link_gbps", x, 1e-3, 1e5);
    for (double x : w.grid_latency_us) g.check_range("latency_us", x, 0.0, 1e6);
  }
  return w;
}

// The described step, with a transport's per-message latency made part of the link's.
RemoteLinkModel effective(const RemoteWhatIfTransport& t, double gbps, double latency_us) {
  return {gbps * t.efficiency.value, latency_us + t.latency_us.value};
}

RemoteStep step_of(const RemoteWhatIfModel& m) {
  return {m.step_s.value, m.step_s.value * m.backward_share.value};
}

RemoteTraffic with_input(RemoteTraffic t, const RemoteWhatIfModel& m) {
  t.bytes_up += m.input_bytes.value;
  return t;
}

std::string gbps_text(double g) {
  if (g <= 0) return "never";
  return report::fixed(g, g < 10 ? 2 : g < 100 ? 1 : 0) + " Gbit/s";
}

std::string grid_table(const RemoteWhatIf& w, const RemoteStep& s, const RemoteTraffic& t,
                       const RemoteWhatIfTransport& tr) {
  std::vector<std::string> head{"link \\ one-way latency"};
  std::string align = "l";
  for (double l : w.grid_latency_us) head.push_back(report::num6(l) + " us"), align += 'r';
  std::vector<std::vector<std::string>> rows;
  for (double g : w.grid_link_gbps) {
    std::vector<std::string> row{report::num6(g) + " Gbit/s"};
    for (double l : w.grid_latency_us) {
      const double k = remote_kept(s, t, effective(tr, g, l));
      row.push_back(report::fixed(100 * k, 0) + "%" + (k >= w.keep ? " ✓" : ""));
    }
    rows.push_back(row);
  }
  return report::md_table(head, align, rows);
}

std::string sources(const RemoteWhatIf& w) {
  std::string md = "Sources:\n\n";
  for (const auto& s : w.servers)
    for (const auto& m : s.models)
      md += "- " + s.name + " " + m.model + " b" + std::to_string(m.batch) + ": step " + report::num6(m.step_s.value) +
            " s (" + m.step_s.source + "); backward " + report::num6(m.backward_share.value) + " of it (" +
            m.backward_share.source + "); input " + report::num6(m.input_bytes.value) + " B up (" +
            m.input_bytes.source + ")\n";
  for (const auto& t : w.transports)
    md += "- " + t.name + ": " + report::num6(t.efficiency.value) + " of the link rate (" + t.efficiency.source +
          "); " + report::num6(t.latency_us.value) + " us per message (" + t.latency_us.source + ")\n";
  return md + "\n";
}

}  // namespace

bool is_remote_what_if(const std::string& text) {
  try {
    const YAML::Node n = YAML::Load(text);
    return n.IsMap() && n["remote"];
  } catch (const YAML::Exception&) {
    return false;  // parse_what_if says what is wrong
  }
}

RemoteWhatIf parse_remote_what_if(const std::string& text, const std::string& origin) {
  return parse_yaml(text, origin, parse_root);
}

RemoteTraffic measured_traffic(const report::Run& run, const std::string& model) {
  std::vector<double> up, down, trips;
  for (const auto& p : run.points) {
    if (p.kind != PointKind::remote || p.model != model) continue;
    for (const report::Record* r : p.ok()) {
      const auto u = report::number_at(r->j, "/remote/per_step/sent_bytes");
      const auto d = report::number_at(r->j, "/remote/per_step/received_bytes");
      const auto n = report::number_at(r->j, "/remote/per_step/round_trips");
      if (u && d && n) up.push_back(*u), down.push_back(*d), trips.push_back(*n);
    }
  }
  if (up.empty())
    throw Error("the run has no remote point of " + model + " with its traffic per step (sweep configs/remote-gpu.yaml "
                "with that model)");
  return {report::median(up), report::median(down), report::median(trips)};
}

double rate_to_keep(const RemoteStep& s, const RemoteTraffic& t, double efficiency, double latency_us, double keep) {
  const auto kept = [&](double gbps) { return remote_kept(s, t, {gbps * efficiency, latency_us}); };
  double lo = 1e-4, hi = 1e7;
  if (kept(hi) < keep) return 0;
  for (int i = 0; i < 200 && hi / lo > 1.0001; ++i) {
    const double mid = std::sqrt(lo * hi);
    (kept(mid) >= keep ? hi : lo) = mid;
  }
  return hi;
}

double latency_to_keep(const RemoteStep& s, const RemoteTraffic& t, double efficiency, double gbps,
                       double stack_latency_us, double keep) {
  // kept >= keep <=> transfer <= base (1/keep - 1); the latency term is round_trips x 2 x L.
  const double slack = s.base_s * (1 / keep - 1) - remote_transfer_s(s, t, {gbps * efficiency, 0});
  if (t.round_trips <= 0) return slack >= 0 ? 1e9 : -1;
  return slack / (2 * t.round_trips) * 1e6 - stack_latency_us;
}

std::string md_remote_what_if(const RemoteWhatIf& w, const report::Run& run) {
  using report::fixed;
  std::string md = "# What-if: " + w.name + " (" + w.origin + ")\n\n" + (w.description.empty() ? "" : w.description + "\n\n");
  md += "Training through a remote device keeps `step_local / step_remote` of local img/s, with predict's remote model "
        "(runner/predict/remote_model.h): step_remote = step_local + bytes_up / R + max(0, bytes_down / R - backward) "
        "+ round_trips x 2 x (L + the transport's own latency), R = the link rate x the transport's efficiency. "
        "Traffic per step from " + run.run_id + "'s remote points. ✓: keeps " + fixed(100 * w.keep, 0) + "% or more.\n\n";
  md += sources(w);
  for (const auto& server : w.servers)
    for (const auto& m : server.models) {
      const RemoteTraffic t = with_input(measured_traffic(run, m.model), m);
      const RemoteStep s = step_of(m);
      md += "## " + server.name + ", " + m.model + " b" + std::to_string(m.batch) + " (step " + fixed(1e3 * s.base_s, 1) +
            " ms; per step " + fixed(t.bytes_up / 1e6, 1) + " MB up, " + fixed(t.bytes_down / 1e6, 1) + " MB down, " +
            fixed(t.round_trips, 0) + " round trips)\n\n";
      std::vector<std::vector<std::string>> answers;
      for (const auto& tr : w.transports) {
        std::vector<std::string> row{tr.name};
        for (double l : {5.0, 50.0})
          row.push_back(gbps_text(rate_to_keep(s, t, tr.efficiency.value, l + tr.latency_us.value, w.keep)));
        for (double g : {10.0, 100.0}) {
          const double l = latency_to_keep(s, t, tr.efficiency.value, g, tr.latency_us.value, w.keep);
          row.push_back(l < 0 ? "never" : fixed(l, 0) + " us");
        }
        answers.push_back(row);
      }
      md += "To keep " + fixed(100 * w.keep, 0) + "%:\n\n" +
            report::md_table({"transport", "link rate needed (link latency 5 us)", "(50 us)",
                              "one-way link latency allowed (10 Gbit/s link)", "(100 Gbit/s)"},
                             "lrrrr", answers) + "\n";
      for (const auto& tr : w.transports)
        md += "Kept over " + tr.name + ":\n\n" + grid_table(w, s, t, tr) + "\n";
    }
  return md;
}

}  // namespace ringbench::predict
