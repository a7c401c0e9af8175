#include "runner/sweep/remote_sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "base/errors.h"
#include "runner/sweep/model_entry.h"
#include "runner/sweep/sweep_config.h"
#include "runner/record/yaml_reader.h"
#include "vgpu/scheduler.h"
#include "runner/analysis/format.h"

namespace ringbench {
namespace {

using json = nlohmann::json;

void parse_links(const YamlReader& r, RemoteSweep& s, double latency_us, double cluster_gbps) {
  if (!r.has("links")) return;
  const YAML::Node links = r.at("links");
  if (!links.IsSequence()) r.fail(r.key("links"), "must be a list of {gbps, latency_us}");
  for (size_t i = 0; i < links.size(); ++i) {
    const std::string where = r.key("links") + "[" + std::to_string(i) + "]";
    YamlReader e(links[i], where, r.origin());
    e.only({"gbps", "latency_us"});
    RemoteLink l;
    e.get_double("gbps", l.gbps, 0, kMaxLinkGbps);
    l.latency_us = latency_us;
    e.get_double("latency_us", l.latency_us, 0, kMaxLatencyUs);
    if (cluster_gbps > 0 && (l.gbps == 0 || l.gbps > cluster_gbps))
      e.fail(e.key("gbps"), (l.gbps == 0 ? std::string("0 (unlimited)") : number_text(l.gbps)) +
                                " Gbit/s is above cluster.link (" + number_text(cluster_gbps) +
                                " Gbit/s), which would be the link's real rate: raise cluster.link or lower this");
    for (const auto& o : s.links)
      if (o.gbps == l.gbps && o.latency_us == l.latency_us) e.fail(where, "is listed twice");
    s.links.push_back(l);
  }
}

// The mean of summary[key]["mean_over_ranks"] over the clients (null where one lacks it).
json mean_over_clients(const std::vector<json>& clients, const char* key) {
  double sum = 0;
  for (const auto& c : clients) {
    const json* v = c["summary"].contains(key) ? &c["summary"][key] : nullptr;
    if (!v || !v->is_object() || !v->contains("mean_over_ranks") || !(*v)["mean_over_ranks"].is_number()) return nullptr;
    sum += (*v)["mean_over_ranks"].get<double>();
  }
  return sum / double(clients.size());
}

}  // namespace

double tc_rate_gbps(const std::string& rate) {
  size_t i = 0;
  const double v = std::stod(rate, &i);
  const std::string unit = rate.substr(i);
  return unit == "gbit" ? v : unit == "mbit" ? v / 1e3 : unit == "kbit" ? v / 1e6 : v / 1e9;
}

RemoteSweep parse_remote(const YamlReader& r, double latency_us, double cluster_gbps) {
  RemoteSweep s;
  r.only({"model", "models", "warmup", "steps", "threads", "clients", "transports", "links", "policy"});
  if (r.has("model") == r.has("models"))
    r.fail(r.key("model"), std::string(r.has("model") ? "and models both given: give one" : "missing") +
                               "; the model trained in every setup, e.g. {model: lenet, batch: 8}, or a list under models");
  if (r.has("model")) {
    RemoteModel m;
    read_train_model(r, r.at("model"), r.key("model"), m.model, m.batch, m.image_size);
    s.models.push_back(m);
  } else {
    const YAML::Node list = r.at("models");
    if (!list.IsSequence() || list.size() == 0) r.fail(r.key("models"), "must be a non-empty list of {model, batch, image_size}");
    for (size_t i = 0; i < list.size(); ++i) {
      RemoteModel m;
      const std::string where = r.key("models") + "[" + std::to_string(i) + "]";
      read_train_model(r, list[i], where, m.model, m.batch, m.image_size);
      for (const auto& o : s.models)
        if (o.model == m.model && o.batch == m.batch && o.image_size == m.image_size) r.fail(where, "is listed twice");
      s.models.push_back(m);
    }
  }
  r.get_int("warmup", s.warmup, 0, kMaxSteps);
  r.get_int("steps", s.steps, 1, kMaxSteps);
  r.get_int("threads", s.threads, 0, 4096);
  if (r.has("clients")) s.clients = r.list<int>("clients", "client counts");
  for (int k : s.clients) r.check_range("clients", k, 2, kMaxVms);
  if (r.has("transports")) s.transports = r.list<std::string>("transports", "transport names");
  for (const auto& t : s.transports)
    if (t != "tcp" && t != "verbs") r.fail(r.key("transports"), quote_excerpt(t) + " is not one of: tcp, verbs");
  parse_links(r, s, latency_us, cluster_gbps);
  r.get("policy", s.policy, "a scheduler policy");
  try {
    vgpu::parse_policy(s.policy);
  } catch (const std::exception&) {
    r.fail(r.key("policy"), quote_excerpt(s.policy) + " is not one of: best_effort, equal_share, fixed_share");
  }
  return s;
}

json to_json(const RemoteSweep& s) {
  json links = json::array();
  for (const auto& l : s.links) links.push_back({{"gbps", l.gbps}, {"latency_us", l.latency_us}});
  json models = json::array();
  for (const auto& m : s.models) models.push_back({{"model", m.model}, {"batch", m.batch}, {"image_size", m.image_size}});
  return {{"models", models}, {"warmup", s.warmup}, {"steps", s.steps}, {"threads", s.threads}, {"clients", s.clients},
          {"transports", s.transports}, {"links", links}, {"policy", s.policy}};
}

void for_each_remote_point(const RemoteSweep& s, int repeat, const std::function<void(const SweepPoint&)>& visit) {
  for (const auto& m : s.models) {
    const std::string base = "remote/" + m.model + "/b" + std::to_string(m.batch) + size_suffix(m.image_size) + "/";
    const auto point = [&](const std::string& setup, int clients, const std::string& transport, int nodes) {
      SweepPoint p = model_point(PointKind::remote, m.model, m.batch, m.image_size, nodes, transport, "none", repeat);
      p.setup = setup;
      p.clients = clients;
      return p;
    };
    SweepPoint local = point("local_device", 0, "none", 1);
    local.id = base + "local_device";
    visit(local);
    SweepPoint loop = point("loopback", 1, "tcp", 1);
    loop.id = base + "loopback";
    visit(loop);
    for (int k : s.clients) {
      SweepPoint p = point("partial", k, "tcp", 1);
      p.id = base + "partial/k" + std::to_string(k);
      visit(p);
    }
    for (const auto& t : s.transports)
      for (const auto& l : s.links) {
        SweepPoint p = point("link", 1, t, 2);
        p.link_gbps = l.gbps;
        p.latency_us = l.latency_us;
        p.id = base + t + "/" + (l.gbps > 0 ? report::num6(l.gbps) + "gbit" : std::string("unshaped")) + "/" +
               report::num6(l.latency_us) + "us";
        visit(p);
      }
  }
}

std::string remote_unavailable(const SweepPoint& p) {
  // Where there is no RDMA device the verbs backend's own check says so (Executor::unavailable).
  if (p.kind == PointKind::remote && p.transport == "verbs" && (p.link_gbps > 0 || p.latency_us > 0))
    return "the device link's rate and latency are emulated by a user-space proxy that forwards TCP bytes; requests "
           "over verbs would bypass it (a verbs link point runs unshaped only: gbps 0, latency_us 0)";
  return "";
}

json merge_remote_results(const std::vector<json>& clients) {
  json doc = {{"meta", clients.front()["meta"]}};
  double total = 0, ci2 = 0;
  json per = json::array();
  for (const auto& c : clients) {
    const json& t = c["summary"]["total_img_s"];
    total += t["mean"].get<double>();
    ci2 += std::pow(t.value("ci95", 0.0), 2);
    per.push_back({{"img_s", t}, {"step_s", c["summary"]["step_s"]}, {"final_hashes", c["summary"].value("final_hashes", json())}});
  }
  doc["summary"] = {{"total_img_s", {{"mean", total}, {"ci95", std::sqrt(ci2)}}},
                    {"step_s", mean_over_clients(clients, "step_s")},
                    {"compute_s", mean_over_clients(clients, "compute_s")},
                    {"forward_s", mean_over_clients(clients, "forward_s")},
                    {"backward_s", mean_over_clients(clients, "backward_s")},
                    {"optimizer_s", mean_over_clients(clients, "optimizer_s")}};
  doc["clients"] = per;
  return doc;
}

json remote_subset(const SweepPoint& p, const json& doc) {
  const json& meta = doc["meta"];
  json out = {{"summary", doc["summary"]}, {"clients", doc["clients"]},
              {"meta", {{"params", meta.value("params", 0)}, {"backend", meta.value("backend", "")},
                        {"threads_per_rank", meta.value("threads_per_rank", 0)}, {"steps", meta.value("steps", 0)},
                        {"warmup", meta.value("warmup", 0)}}}};
  if (meta.contains("remote")) {
    const json& r = meta["remote"];
    out["per_step"] = r.value("per_step", json());
    out["device"] = r.value("device", json());
    out["link"] = {{"transport", r["link"].value("transport", "")}, {"interface", r["link"].value("interface", "")}};
  } else {
    out["per_step"] = nullptr;
    out["device"] = nullptr;
    out["link"] = nullptr;
  }
  if (p.setup == "link") {
    out["link"]["gbps"] = p.link_gbps;
    out["link"]["latency_us"] = p.latency_us;
    out["link"]["shaped_by"] = "the device server's user-space shaping proxy (no netem on this kernel)";
  }
  return out;
}

}  // namespace ringbench
