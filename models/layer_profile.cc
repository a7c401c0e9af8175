#include "models/layer_profile.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace ringbench::models {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

std::string rtrim(std::string s) {  // then the newline back
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.pop_back();
  return s + "\n";
}

}  // namespace

std::string layer_kind(const Graph& g, int node) {
  const Node& n = g.nodes[size_t(node)];
  if (n.kind != OpKind::conv) return op_name(n.kind);
  std::string k = "conv " + std::to_string(n.conv.kh) + "x" + std::to_string(n.conv.kw);
  const int in_c = g.nodes[size_t(n.inputs[0])].out.c;
  if (n.conv.groups > 1) k += n.conv.groups == in_c && n.conv.out_channels == in_c ? " depthwise" : " grouped";
  return k;
}

double forward_flops(const Graph& g, int node, int batch) {
  const Node& n = g.nodes[size_t(node)];
  const Dims& in = g.nodes[size_t(n.inputs.empty() ? 0 : n.inputs[0])].out;
  if (n.kind == OpKind::conv)
    return 2.0 * batch * double(n.out.numel()) * (in.c / n.conv.groups) * n.conv.kh * n.conv.kw;
  if (n.kind == OpKind::fc) return 2.0 * batch * double(in.numel()) * n.fc.out_features;
  return 0;
}

LayerProfile::LayerProfile(const Graph& g, int batch)
    : g_(g), batch_(batch), fwd_(g.nodes.size()), bwd_(g.nodes.size()),
      cur_fwd_(g.nodes.size(), 0), cur_bwd_(g.nodes.size(), 0) {}

void LayerProfile::add(int node, Phase phase, double seconds) {
  (phase == Phase::forward ? cur_fwd_ : cur_bwd_)[size_t(node)] += seconds;
}

void LayerProfile::end_step(double step_s) {
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    fwd_[i].push_back(cur_fwd_[i]);
    bwd_[i].push_back(cur_bwd_[i]);
  }
  std::fill(cur_fwd_.begin(), cur_fwd_.end(), 0.0);
  std::fill(cur_bwd_.begin(), cur_bwd_.end(), 0.0);
  step_s_.push_back(step_s);
}

double LayerProfile::step_s() const { return median(step_s_); }

std::vector<LayerProfile::Row> LayerProfile::layers() const {
  std::vector<Row> rows;
  for (size_t i = 1; i < g_.nodes.size(); ++i) {
    Row r;
    r.name = g_.nodes[i].name;
    r.kind = layer_kind(g_, int(i));
    r.forward_s = median(fwd_[i]);
    r.backward_s = median(bwd_[i]);
    r.flops = 3 * forward_flops(g_, int(i), batch_);
    rows.push_back(r);
  }
  return rows;
}

std::vector<LayerProfile::Row> LayerProfile::kinds() const {
  std::map<std::string, Row> by_kind;
  for (const Row& l : layers()) {
    auto [it, fresh] = by_kind.try_emplace(l.kind);
    Row& k = it->second;
    if (!fresh) ++k.layers;
    k.kind = l.kind;
    k.forward_s += l.forward_s;
    k.backward_s += l.backward_s;
    k.flops += l.flops;
  }
  std::vector<Row> rows;
  for (auto& [_, r] : by_kind) rows.push_back(r);
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.total_s() > b.total_s(); });
  return rows;
}

nlohmann::json LayerProfile::to_json() const {
  auto row = [](const Row& r) {
    nlohmann::json j = {{"kind", r.kind}, {"forward_s", r.forward_s}, {"backward_s", r.backward_s},
                        {"flops", r.flops}};
    if (r.name.empty()) j["layers"] = r.layers;
    else j["name"] = r.name;
    return j;
  };
  nlohmann::json ls = nlohmann::json::array(), ks = nlohmann::json::array();
  for (const Row& r : layers()) ls.push_back(row(r));
  for (const Row& r : kinds()) ks.push_back(row(r));
  return {{"steps", steps()}, {"step_s", step_s()}, {"kinds", ks}, {"layers", ls}};
}

std::string LayerProfile::to_text(int top) const {
  const double step = step_s();
  double in_layers = 0;
  const auto ks = kinds();
  for (const Row& k : ks) in_layers += k.total_s();
  auto share = [&](double s) { return step > 0 ? 100 * s / step : 0.0; };
  auto rate = [](const Row& r) {
    return r.flops > 0 && r.total_s() > 0 ? fmt("%9.1f", r.flops / r.total_s() / 1e9) : std::string();
  };
  std::string out = "# layers: " + fmt("%.2f ms", in_layers * 1e3) + " of a " + fmt("%.2f ms", step * 1e3) +
                    " step (" + fmt("%.1f%%", share(in_layers)) + "); the rest is the loss, waits for the allreduce and the optimizer\n";
  out += "#   kind                  layers  forward_ms  backward_ms   share   GFLOP/s\n";
  for (const Row& k : ks) {
    char line[160];
    std::snprintf(line, sizeof line, "#   %-20s %7d  %10.3f  %11.3f  %5.1f%%  %s\n", k.kind.c_str(), k.layers,
                  k.forward_s * 1e3, k.backward_s * 1e3, share(k.total_s()), rate(k).c_str());
    out += rtrim(line);
  }
  auto ls = layers();
  std::stable_sort(ls.begin(), ls.end(), [](const Row& a, const Row& b) { return a.total_s() > b.total_s(); });
  if (int(ls.size()) > top) ls.resize(size_t(top));
  out += "# slowest layers:\n#   layer                              kind                  forward_ms  backward_ms   share   GFLOP/s\n";
  for (const Row& l : ls) {
    char line[200];
    std::snprintf(line, sizeof line, "#   %-34s %-20s %11.3f  %11.3f  %5.1f%%  %s\n", l.name.c_str(), l.kind.c_str(),
                  l.forward_s * 1e3, l.backward_s * 1e3, share(l.total_s()), rate(l).c_str());
    out += rtrim(line);
  }
  return out;
}

}  // namespace ringbench::models
