#include "models/graph.h"

#include <cmath>
#include <stdexcept>
#include <utility>

namespace ringbench::models {

std::string to_string(const Dims& d) {
  return std::to_string(d.c) + "x" + std::to_string(d.h) + "x" + std::to_string(d.w);
}

const char* op_name(OpKind k) {
  switch (k) {
    case OpKind::input: return "input";
    case OpKind::conv: return "conv";
    case OpKind::batch_norm: return "batchnorm";
    case OpKind::relu: return "relu";
    case OpKind::relu6: return "relu6";
    case OpKind::max_pool: return "maxpool";
    case OpKind::avg_pool: return "avgpool";
    case OpKind::concat: return "concat";
    case OpKind::fc: return "fc";
    case OpKind::dropout: return "dropout";
  }
  return "?";
}

namespace {

[[noreturn]] void bad(const std::string& node, const std::string& why) {
  throw std::invalid_argument("layer '" + node + "': " + why);
}

int window_out(const std::string& node, int in, int k, int stride, int pad_lo, int pad_hi) {
  if (k < 1 || stride < 1 || pad_lo < 0 || pad_hi < 0) bad(node, "kernel, stride and padding must be positive");
  if (pad_lo >= k || pad_hi >= k) bad(node, "padding must be smaller than the kernel");
  const int span = in + pad_lo + pad_hi - k;
  if (span < 0) bad(node, "kernel " + std::to_string(k) + " larger than the padded input " + std::to_string(in + pad_lo + pad_hi));
  return span / stride + 1;
}

// The output of a window (conv, pooling) sliding over `in`: `channels` x out height x out width.
Dims window_dims(const std::string& node, int channels, const Dims& in, int kh, int kw, int stride_h, int stride_w,
                 const Pads& pad) {
  return {channels, window_out(node, in.h, kh, stride_h, pad.top, pad.bottom),
          window_out(node, in.w, kw, stride_w, pad.left, pad.right)};
}

// A node of `kind` named `name` reading `inputs`; its spec and output are the caller's to fill.
Node layer(OpKind kind, const std::string& name, std::vector<int> inputs) {
  Node n;
  n.kind = kind;
  n.name = name;
  n.inputs = std::move(inputs);
  return n;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

const Dims& Graph::dims_of(int x, const std::string& node) const {
  if (x < 0 || x >= int(nodes.size()))
    bad(node, "input node " + std::to_string(x) + " does not exist (the graph has " +
                  std::to_string(nodes.size()) + " nodes)");
  return nodes[size_t(x)].out;
}

int Graph::add(Node n) {
  for (int in : n.inputs)
    if (in < 0 || in >= int(nodes.size())) bad(n.name, "input node " + std::to_string(in) + " does not exist");
  if (n.kind != OpKind::input && nodes.empty()) bad(n.name, "the graph needs an input first");
  for (const Node& other : nodes)
    if (other.name == n.name) bad(n.name, "duplicate layer name");
  nodes.push_back(std::move(n));
  return int(nodes.size()) - 1;
}

int Graph::add_param(int node, const std::string& pname, const std::string& kind,
                     std::vector<int> shape, bool decay) {
  ParamTensor p;
  p.name = pname;
  p.kind = kind;
  p.numel = 1;
  for (int s : shape) p.numel *= size_t(s);
  p.shape = std::move(shape);
  p.offset = param_count;
  p.decay = decay;
  p.node = node;
  param_count += p.numel;
  params.push_back(std::move(p));
  nodes[node].params.push_back(int(params.size()) - 1);
  return int(params.size()) - 1;
}

int Graph::input(Dims d) {
  if (!nodes.empty()) bad("input", "the graph already has an input");
  if (d.c < 1 || d.h < 1 || d.w < 1) bad("input", "dimensions must be positive");
  Node n;
  n.kind = OpKind::input;
  n.name = "input";
  n.out = d;
  return add(std::move(n));
}

int Graph::conv(int x, const std::string& name, const ConvSpec& s) {
  const Dims in = dims_of(x, name);
  if (s.groups < 1 || in.c % s.groups || s.out_channels % s.groups || s.out_channels < 1)
    bad(name, "channels in (" + std::to_string(in.c) + ") and out (" + std::to_string(s.out_channels) +
                  ") must be positive multiples of groups (" + std::to_string(s.groups) + ")");
  Node n = layer(OpKind::conv, name, {x});
  n.conv = s;
  n.out = window_dims(name, s.out_channels, in, s.kh, s.kw, s.stride_h, s.stride_w, s.pad);
  const int id = add(std::move(n));
  const bool depthwise = s.groups > 1 && s.groups == in.c;
  add_param(id, name + ".weight", depthwise ? "dwconv_w" : "conv_w",
            {s.out_channels, in.c / s.groups, s.kh, s.kw}, true);
  if (s.bias) add_param(id, name + ".bias", "bias", {s.out_channels}, false);
  return id;
}

int Graph::batch_norm(int x, const std::string& name, const BatchNormSpec& s) {
  if (!(s.eps > 0) || !(s.momentum >= 0 && s.momentum <= 1)) bad(name, "eps must be > 0 and momentum in [0, 1]");
  Node n = layer(OpKind::batch_norm, name, {x});
  n.bn = s;
  n.out = dims_of(x, name);
  const int id = add(std::move(n));
  const int c = nodes[id].out.c;
  add_param(id, name + ".gamma", "bn_gamma", {c}, false);
  add_param(id, name + ".beta", "bn_beta", {c}, false);
  state.push_back({name + ".running", state_count, size_t(c), id});
  nodes[id].state = int(state.size()) - 1;
  state_count += 2 * size_t(c);
  return id;
}

int Graph::relu(int x, const std::string& name) {
  Node n = layer(OpKind::relu, name, {x});
  n.out = dims_of(x, name);
  return add(std::move(n));
}

int Graph::relu6(int x, const std::string& name) {
  const int id = relu(x, name);
  nodes[id].kind = OpKind::relu6;
  return id;
}

int Graph::max_pool(int x, const std::string& name, const PoolSpec& s) {
  const Dims in = dims_of(x, name);
  Node n = layer(OpKind::max_pool, name, {x});
  n.pool = s;
  n.out = window_dims(name, in.c, in, s.kh, s.kw, s.stride_h, s.stride_w, s.pad);
  return add(std::move(n));
}

int Graph::avg_pool(int x, const std::string& name, const PoolSpec& s) {
  const int id = max_pool(x, name, s);
  nodes[id].kind = OpKind::avg_pool;
  return id;
}

int Graph::concat(const std::vector<int>& xs, const std::string& name) {
  if (xs.size() < 2) bad(name, "concat needs at least two inputs");
  Node n = layer(OpKind::concat, name, xs);
  n.out = dims_of(xs[0], name);
  n.out.c = 0;
  for (int x : xs) {
    const Dims d = dims_of(x, name);
    if (d.h != n.out.h || d.w != n.out.w)
      bad(name, "inputs differ in height/width: " + to_string(dims_of(xs[0], name)) + " vs " + to_string(d));
    n.out.c += d.c;
  }
  return add(std::move(n));
}

int Graph::fc(int x, const std::string& name, const FcSpec& s) {
  if (s.out_features < 1) bad(name, "out_features must be positive");
  const int64_t in = dims_of(x, name).numel();
  Node n = layer(OpKind::fc, name, {x});
  n.fc = s;
  n.out = {s.out_features, 1, 1};
  const int id = add(std::move(n));
  add_param(id, name + ".weight", "fc_w", {s.out_features, int(in)}, true);
  if (s.bias) add_param(id, name + ".bias", "bias", {s.out_features}, false);
  return id;
}

int Graph::dropout(int x, const std::string& name, float rate) {
  if (!(rate >= 0 && rate < 1)) bad(name, "dropout rate must be in [0, 1)");
  Node n = layer(OpKind::dropout, name, {x});
  n.dropout.rate = rate;
  n.out = dims_of(x, name);
  return add(std::move(n));
}

void Graph::add_output(int node, float loss_weight) {
  if (node < 1 || node >= int(nodes.size())) bad("output", "no such node " + std::to_string(node));
  outputs.push_back({node, loss_weight});
}

std::vector<const ParamTensor*> Graph::params_backprop_order() const {
  std::vector<const ParamTensor*> out;
  for (auto it = params.rbegin(); it != params.rend(); ++it) out.push_back(&*it);
  return out;
}

void init_params(const Graph& g, uint64_t seed, float* params, float* state) {
  for (size_t t = 0; t < g.params.size(); ++t) {
    const ParamTensor& p = g.params[t];
    float* v = params + p.offset;
    if (p.kind == "bn_gamma") {
      for (size_t i = 0; i < p.numel; ++i) v[i] = 1.0f;
    } else if (p.kind == "bias" || p.kind == "bn_beta") {
      for (size_t i = 0; i < p.numel; ++i) v[i] = 0.0f;
    } else {
      const size_t fan_in = p.numel / size_t(p.shape[0]);
      const double bound = std::sqrt(6.0 / double(fan_in));
      uint64_t s = splitmix64(seed ^ splitmix64(t + 1));
      for (size_t i = 0; i < p.numel; ++i) {
        s = splitmix64(s);
        const double u = double(s >> 11) * 0x1.0p-53;  // [0, 1)
        v[i] = float((2 * u - 1) * bound);
      }
    }
  }
  for (const StateTensor& st : g.state) {
    for (size_t i = 0; i < st.channels; ++i) {
      state[st.offset + i] = 0.0f;
      state[st.offset + st.channels + i] = 1.0f;
    }
  }
}

bool dropout_keep(uint64_t seed, uint64_t step, int node, int64_t sample, int64_t elem, float rate) {
  uint64_t h = splitmix64(seed ^ 0x6472'6f70'6f75'74ull);
  h = splitmix64(h ^ step);
  h = splitmix64(h ^ uint64_t(node));
  h = splitmix64(h ^ uint64_t(sample));
  h = splitmix64(h ^ uint64_t(elem));
  const double u = double(h >> 40) * 0x1.0p-24;  // [0, 1), 24 bits
  return u >= double(rate);
}

}  // namespace ringbench::models
