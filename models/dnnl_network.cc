// The oneDNN CPU backend. Every primitive is created once, when the network is built; forward
// and backward only execute plans (lists of primitives with their memories, and a few host
// loops). Activations stay in the layouts oneDNN prefers: each conv picks its own (format
// `any`) and the ops after it (batch norm, eltwise, pooling, concat) keep that layout, so
// reorders happen only where a layout really changes: the network input and outputs (plain
// NCHW at the interface), a conv wanting another layout than its producer gives, dropout
// (a host loop on NCHW), weights (the flat buffers hold plain OIHW / [out, in]).
//
// Gradients flow the same way: each node owns a gradient in its activation's layout. The
// first consumer (in backward order) of a node overwrites that gradient, later consumers add
// into it (sum, or a reorder with a sum post-op across layouts). The network input's gradient
// (tests only) is left out of backward() and computed on demand by get_input_grad(), unless a
// batch norm reads the input (its one primitive makes both input and parameter gradients);
// it then uses the weights as they are at that call.
//
// FCs run on plain NCHW with the flat weights in place (the weights are the big tensor there);
// convs reorder their weights to the blocked layout they want once per forward, and their
// weight gradients back into the flat buffer in backward.
//
// File layout: helpers, the network class, its setup (one function per op family), its
// execution, then the profiler.
#include "models/dnnl_network.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "models/backends.h"
#include "base/device_memory.h"
#include "base/errors.h"

namespace ringbench::models {
namespace {

using dnnl::memory;
using Md = memory::desc;
using Tag = memory::format_tag;
using Args = std::unordered_map<int, memory>;
using Clock = std::chrono::steady_clock;
constexpr auto f32 = memory::data_type::f32;

memory::dims nchw_dims(int batch, const Dims& d) { return {batch, d.c, d.h, d.w}; }
Md plain_md(int batch, const Dims& d) { return Md(nchw_dims(batch, d), f32, Tag::nchw); }
Md any_md(int batch, const Dims& d) { return Md(nchw_dims(batch, d), f32, Tag::any); }
Md vec_md(int n) { return Md({n}, f32, Tag::x); }

// The format tag of a 4-D activation layout, among those oneDNN picks for f32 on CPUs; undef
// for any other.
Tag tag_of(const Md& d) {
  for (Tag t : {Tag::nChw16c, Tag::nChw8c, Tag::nchw, Tag::nhwc})
    if (Md(d.dims(), f32, t) == d) return t;
  return Tag::undef;
}

int channel_block(Tag t) { return t == Tag::nChw16c ? 16 : t == Tag::nChw8c ? 8 : 1; }

float* data(const memory& m) { return static_cast<float*>(m.get_data_handle()); }

// Which passes run an op: forward ops by the kind of forward, backward ops by the kind of the
// forward that preceded them (batch norm and dropout differ).
enum class Mode : uint8_t { always, training, inference };

bool active(Mode m, bool training) {
  return m == Mode::always || (m == Mode::training) == training;
}

// One step of a plan: a primitive with its arguments, or a host loop (fn).
struct Op {
  std::string what;
  dnnl::primitive prim;
  Args args;
  std::function<void()> fn;
  Mode mode = Mode::always;
  bool input_grad_only = false;  // backward: feeds only the network input's gradient
};

class OnednnNetwork final : public Network {
 public:
  OnednnNetwork(const Graph& g, int batch);

  const Graph& graph() const override { return g_; }
  int batch() const override { return batch_; }
  std::string backend() const override { return "onednn"; }
  std::string describe() const override;

  void bind(float* params, float* grads, float* state) override;
  void set_input(const float* x) override;
  void forward(const ForwardArgs& args) override;
  void get_output(size_t i, float* y) override;
  void set_output_grad(size_t i, const float* dy) override;
  void backward(const std::function<void(int node)>& on_param_grads) override;
  void get_input_grad(float* dx) override;

  // See profile_onednn_primitives(); call after a training forward and a backward.
  std::vector<PrimitiveTime> profile(int reps);

 private:
  struct Act {  // a node's output and the gradient of the loss with respect to it
    Md md;
    memory y, dy;
  };
  enum class Buf { params, grads, state };
  struct View {  // a memory over a caller-owned flat buffer, pointed there by bind()
    memory mem;
    Buf buf;
    size_t offset;
  };
  struct Converted {  // a reorder already planned: `from` in layout `want` is `to`
    dnnl_memory_t from;
    Md want;
    int scope;  // -1: made in forward (valid everywhere after it); else that node's backward
    bool deferred;
    memory to;
  };
  struct OutputIo {
    Md plain;
    dnnl::reorder to_plain;  // empty when the output already is plain NCHW
  };

  // Setup, one function per op family.
  void setup_conv(int i);
  void setup_batch_norm(int i);
  void setup_eltwise(int i);
  void setup_pool(int i);
  void setup_concat(int i);
  void setup_fc(int i);
  void setup_dropout(int i);
  void setup_outputs();

  // Setup helpers.
  memory alloc(const Md& d);
  Act make_act(const Md& d) { return {d, alloc(d), alloc(d)}; }
  memory view(const Md& d, Buf buf, size_t offset);
  memory scratch(const Md& d);
  size_t param_offset(int node, size_t k) const { return g_.params[g_.nodes[node].params.at(k)].offset; }
  std::string note(const std::string& family, const dnnl::primitive_desc_base& pd);
  Op prim_op(std::string what, dnnl::primitive prim, Args args, Mode mode = Mode::always, bool deferred = false);
  Op reorder_op(const memory& from, const memory& to, const std::string& what, bool accumulate, bool deferred);
  memory convert(const memory& from, const Md& want, std::vector<Op>& ops, const std::string& what, int scope,
                 bool deferred = false);
  void fold(int p, bool first, const memory& contrib, std::vector<Op>& ops, bool deferred);
  memory sink(int p, bool first, const Md& produced, std::vector<Op>& post, bool deferred);
  void weights_to_plain(const memory& from, const memory& plain, std::vector<Op>& ops);
  bool first_contribution(int p, int consumer, int slot) const {
    return first_slot_[p] == std::pair<int, int>{consumer, slot};
  }
  bool deferred(int p) const { return p == 0 && defer_input_grad_; }

  // Execution.
  void run(const Op& op) {
    if (op.prim) {
      op.prim.execute(strm_, op.args);
    } else {
      strm_.wait();
      op.fn();
    }
  }

  Graph g_;
  int batch_;
  dnnl::engine eng_;
  dnnl::stream strm_;

  std::vector<Act> act_;
  std::vector<std::vector<Op>> fwd_, bwd_;  // per node
  std::vector<Op> out_grad_ops_;            // output gradients into the outputs' dy
  std::vector<memory> out_dy_;              // plain NCHW, per output
  std::vector<bool> out_dy_set_;
  std::vector<OutputIo> out_io_;

  std::vector<View> views_;
  std::vector<Converted> converted_;
  std::vector<std::pair<int, int>> first_slot_;  // per node: (consumer, input slot) writing its dy first
  bool defer_input_grad_ = false;
  bool has_deferred_ = false;
  std::vector<memory> scratch_users_;  // all share one buffer: each use ends before the next starts
  size_t scratch_bytes_ = 0;
  memory scratch_buf_;
  std::vector<std::pair<std::string, int>> impls_;  // describe(): "conv fwd jit:avx512_core", count
  std::vector<DeviceBuffer> buffers_;  // what every memory from alloc() points into
  std::vector<DeviceVector<float>> dropout_mask_;  // per node: 0 or 1 / (1 - rate) per element

  float* state_ = nullptr;  // read by the running-statistics loops
  ForwardArgs args_;
  bool bound_ = false, forwarded_ = false, backwarded_ = false, last_training_ = true;
  bool input_grad_ready_ = false;
};

// ---------------------------------------------------------------------------------------------
// Setup

OnednnNetwork::OnednnNetwork(const Graph& g, int batch)
    : g_(g), batch_(batch), eng_(dnnl::engine::kind::cpu, 0), strm_(eng_) {
  check_network_args(g_, batch, "onednn network");
  const int n = int(g_.nodes.size());

  // Who writes each node's gradient first in backward order (backends.h); everyone else
  // accumulates. Where a batch norm reads the input, the input gradient is computed in backward
  // like the others.
  GradientWriters writers = plan_gradient_writers(g_);
  first_slot_ = std::move(writers.first_slot);
  defer_input_grad_ = writers.defer_input_grad;

  act_.resize(size_t(n));
  fwd_.resize(size_t(n));
  bwd_.resize(size_t(n));
  dropout_mask_.resize(size_t(n));
  act_[0] = make_act(plain_md(batch_, g_.nodes[0].out));
  for (int i = 1; i < n; ++i) {
    const Node& node = g_.nodes[i];
    try {
      switch (node.kind) {
        case OpKind::input: throw std::invalid_argument("only node 0 may be an input");
        case OpKind::conv: setup_conv(i); break;
        case OpKind::batch_norm: setup_batch_norm(i); break;
        case OpKind::relu:
        case OpKind::relu6: setup_eltwise(i); break;
        case OpKind::max_pool:
        case OpKind::avg_pool: setup_pool(i); break;
        case OpKind::concat: setup_concat(i); break;
        case OpKind::fc: setup_fc(i); break;
        case OpKind::dropout: setup_dropout(i); break;
      }
    } catch (const dnnl::error& e) {
      throw Error("onednn network: layer '" + node.name + "' (" + op_name(node.kind) + "): " + e.what());
    }
    if (act_[i].md.dims() != nchw_dims(batch_, node.out))
      throw std::logic_error("onednn network: layer '" + node.name + "' produced another shape than the graph's " +
                             to_string(node.out));
  }
  setup_outputs();

  for (const auto& ops : bwd_)
    for (const Op& op : ops) has_deferred_ = has_deferred_ || op.input_grad_only;
  if (scratch_bytes_ > 0) {
    scratch_buf_ = alloc(Md({memory::dim(scratch_bytes_ / sizeof(float) + 1)}, f32, Tag::x));
    for (memory& m : scratch_users_) m.set_data_handle(scratch_buf_.get_data_handle());
  }
}

memory OnednnNetwork::alloc(const Md& d) {
  buffers_.emplace_back(d.get_size(), "onednn tensor");
  memory m(d, eng_, buffers_.back().data());
  if (d.get_size() > 0) std::memset(m.get_data_handle(), 0, d.get_size());  // dead-end gradients stay zero
  return m;
}

memory OnednnNetwork::view(const Md& d, Buf buf, size_t offset) {
  memory m(d, eng_, nullptr);
  views_.push_back({m, buf, offset});
  return m;
}

memory OnednnNetwork::scratch(const Md& d) {
  memory m(d, eng_, nullptr);
  scratch_users_.push_back(m);
  scratch_bytes_ = std::max(scratch_bytes_, d.get_size());
  return m;
}

std::string OnednnNetwork::note(const std::string& family, const dnnl::primitive_desc_base& pd) {
  std::string key = family + " " + pd.impl_info_str();
  auto it = std::find_if(impls_.begin(), impls_.end(), [&](const auto& e) { return e.first == key; });
  if (it == impls_.end())
    impls_.emplace_back(key, 1);
  else
    ++it->second;
  return key;
}

Op OnednnNetwork::prim_op(std::string what, dnnl::primitive prim, Args args, Mode mode, bool deferred) {
  Op op;
  op.what = std::move(what);
  op.prim = std::move(prim);
  op.args = std::move(args);
  op.mode = mode;
  op.input_grad_only = deferred;
  return op;
}

Op OnednnNetwork::reorder_op(const memory& from, const memory& to, const std::string& what, bool accumulate,
                             bool deferred) {
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  const dnnl::reorder::primitive_desc pd(eng_, from.get_desc(), eng_, to.get_desc(), attr);
  return prim_op(note(what, pd), dnnl::reorder(pd), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, Mode::always,
                 deferred);
}

// `from` in layout `want`: itself when it already is, else a reorder planned into `ops` (once:
// forward conversions are shared by all later users, backward ones within their node).
memory OnednnNetwork::convert(const memory& from, const Md& want, std::vector<Op>& ops, const std::string& what,
                              int scope, bool deferred) {
  if (from.get_desc() == want) return from;
  for (const Converted& c : converted_)
    if (c.from == from.get() && c.want == want && (c.scope == -1 || c.scope == scope) && (!c.deferred || deferred))
      return c.to;
  memory to = alloc(want);
  ops.push_back(reorder_op(from, to, what, false, deferred));
  converted_.push_back({from.get(), want, scope, deferred, to});
  return to;
}

// Adds a consumer's gradient contribution `contrib` (any layout) into node p's dy.
void OnednnNetwork::fold(int p, bool first, const memory& contrib, std::vector<Op>& ops, bool deferred) {
  const Act& a = act_[p];
  if (first || contrib.get_desc() != a.md) {
    ops.push_back(reorder_op(contrib, a.dy, first ? "reorder diff" : "reorder+sum diff", !first, deferred));
    return;
  }
  const dnnl::sum::primitive_desc pd(a.md, {1.0f, 1.0f}, {a.md, a.md}, eng_);
  ops.push_back(prim_op(note("sum diff", pd), dnnl::sum(pd),
                        {{DNNL_ARG_MULTIPLE_SRC, a.dy}, {DNNL_ARG_MULTIPLE_SRC + 1, contrib}, {DNNL_ARG_DST, a.dy}},
                        Mode::always, deferred));
}

// Where a consumer's primitive writes its gradient for node p (produced in layout `produced`):
// p's dy itself when it may overwrite it in that layout, else scratch folded in by `post`.
memory OnednnNetwork::sink(int p, bool first, const Md& produced, std::vector<Op>& post, bool deferred) {
  if (first && produced == act_[p].md) return act_[p].dy;
  memory s = scratch(produced);
  fold(p, first, s, post, deferred);
  return s;
}

// Blocked weight gradients into the flat (plain) gradient buffer. oneDNN 2.6's direct reorder
// from the layouts blocked "i-major, o-minor" (OIhw16i16o, bwd_weights' choice for 1x1 convs)
// to plain is pathologically slow for large power-of-two input counts (4.1 ms for 1024x1024
// on AVX-512, single thread), while going through the transposed blocking takes 0.3 + 0.3 ms.
void OnednnNetwork::weights_to_plain(const memory& from, const memory& plain, std::vector<Op>& ops) {
  const Md& md = from.get_desc();
  const memory::dims dims = md.dims();
  using Detour = std::pair<Tag, Tag>;  // slow source layout, intermediate
  const std::vector<Detour> detours =
      dims.size() == 5 ? std::vector<Detour>{{Tag::gOIhw16i16o, Tag::gOIhw16o16i}, {Tag::gOIhw8i8o, Tag::gOIhw8o8i}}
                       : std::vector<Detour>{{Tag::OIhw16i16o, Tag::OIhw16o16i}, {Tag::OIhw8i8o, Tag::OIhw8o8i}};
  for (const auto& [slow, via] : detours)
    if (Md(dims, f32, slow) == md) {
      const memory mid = alloc(Md(dims, f32, via));
      ops.push_back(reorder_op(from, mid, "reorder diff_weights (transpose blocks)", false, false));
      ops.push_back(reorder_op(mid, plain, "reorder diff_weights", false, false));
      return;
    }
  ops.push_back(reorder_op(from, plain, "reorder diff_weights", false, false));
}

void OnednnNetwork::setup_conv(int i) {
  using namespace dnnl;
  const Node& n = g_.nodes[i];
  const ConvSpec& s = n.conv;
  const int p = n.inputs[0];
  const Dims& in = g_.nodes[p].out;
  const memory::dims strides{s.stride_h, s.stride_w}, pad_l{s.pad.top, s.pad.left},
      pad_r{s.pad.bottom, s.pad.right};
  const bool grouped = s.groups > 1;
  const memory::dims wdims = grouped ? memory::dims{s.groups, s.out_channels / s.groups, in.c / s.groups, s.kh, s.kw}
                                     : memory::dims{s.out_channels, in.c, s.kh, s.kw};
  const Md w_plain_md(wdims, f32, grouped ? Tag::goihw : Tag::oihw);  // = the flat [O, I/g, kh, kw]
  const Md w_any(wdims, f32, Tag::any);
  const Md b_md = s.bias ? vec_md(s.out_channels) : Md();
  const Md src_any = any_md(batch_, in), dst_any = any_md(batch_, n.out);
  const auto alg = algorithm::convolution_direct;

  // Forward.
  const convolution_forward::primitive_desc fpd(
      {prop_kind::forward_training, alg, src_any, w_any, b_md, dst_any, strides, pad_l, pad_r}, eng_);
  std::vector<Op>& f = fwd_[i];
  const memory w_plain = view(w_plain_md, Buf::params, param_offset(i, 0));
  const memory w = convert(w_plain, fpd.weights_desc(), f, "reorder weights", -1);
  const memory src = convert(act_[p].y, fpd.src_desc(), f, "reorder src", -1);
  act_[i] = make_act(fpd.dst_desc());
  Args fargs{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, act_[i].y}};
  if (s.bias) fargs[DNNL_ARG_BIAS] = view(b_md, Buf::params, param_offset(i, 1));
  f.push_back(prim_op(note("conv fwd", fpd), convolution_forward(fpd), std::move(fargs)));

  // Backward data (first: it reads the weights, which may change once the gradients are out).
  std::vector<Op>& b = bwd_[i];
  const bool dfr = deferred(p);
  const convolution_backward_data::primitive_desc bdpd({alg, src_any, w_any, dst_any, strides, pad_l, pad_r}, eng_,
                                                       fpd);
  const memory dd = convert(act_[i].dy, bdpd.diff_dst_desc(), b, "reorder diff_dst", i);
  const memory wd = convert(w_plain, bdpd.weights_desc(), b, "reorder weights", i, dfr);
  std::vector<Op> post;
  const memory ds = sink(p, first_contribution(p, i, 0), bdpd.diff_src_desc(), post, dfr);
  b.push_back(prim_op(note("conv bwd_data", bdpd), convolution_backward_data(bdpd),
                      {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, wd}, {DNNL_ARG_DIFF_SRC, ds}}, Mode::always, dfr));
  b.insert(b.end(), post.begin(), post.end());

  // Backward weights.
  const convolution_backward_weights::primitive_desc bwpd(
      {alg, src_any, w_any, b_md, dst_any, strides, pad_l, pad_r}, eng_, fpd);
  const memory src_w = convert(src, bwpd.src_desc(), b, "reorder src", i);
  const memory dd_w = convert(act_[i].dy, bwpd.diff_dst_desc(), b, "reorder diff_dst", i);
  const memory gw_plain = view(w_plain_md, Buf::grads, param_offset(i, 0));
  const memory gw = bwpd.diff_weights_desc() == w_plain_md ? gw_plain : alloc(bwpd.diff_weights_desc());
  Args wargs{{DNNL_ARG_SRC, src_w}, {DNNL_ARG_DIFF_DST, dd_w}, {DNNL_ARG_DIFF_WEIGHTS, gw}};
  if (s.bias) wargs[DNNL_ARG_DIFF_BIAS] = view(b_md, Buf::grads, param_offset(i, 1));
  b.push_back(prim_op(note("conv bwd_weights", bwpd), convolution_backward_weights(bwpd), std::move(wargs)));
  if (gw.get() != gw_plain.get()) weights_to_plain(gw, gw_plain, b);
}

void OnednnNetwork::setup_batch_norm(int i) {
  using namespace dnnl;
  const Node& n = g_.nodes[i];
  const int p = n.inputs[0];
  const int c = n.out.c;
  const Md& d = act_[p].md;
  const float eps = n.bn.eps;
  const auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
  const auto global = flags | normalization_flags::use_global_stats;

  const batch_normalization_forward::primitive_desc tpd({prop_kind::forward_training, d, eps, flags}, eng_);
  const batch_normalization_forward::primitive_desc ipd({prop_kind::forward_inference, d, eps, global}, eng_);
  act_[i] = make_act(tpd.dst_desc());
  const memory gamma = view(vec_md(c), Buf::params, param_offset(i, 0));
  const memory beta = view(vec_md(c), Buf::params, param_offset(i, 1));
  const size_t soff = g_.state.at(size_t(n.state)).offset;
  const memory run_mean = view(vec_md(c), Buf::state, soff);
  const memory run_var = view(vec_md(c), Buf::state, soff + size_t(c));
  const memory mean = alloc(tpd.mean_desc()), var = alloc(tpd.variance_desc());

  // Forward: batch statistics and the running-statistics update in training, else the
  // running statistics.
  std::vector<Op>& f = fwd_[i];
  f.push_back(prim_op(note("bn fwd", tpd), batch_normalization_forward(tpd),
                      {{DNNL_ARG_SRC, act_[p].y}, {DNNL_ARG_DST, act_[i].y}, {DNNL_ARG_SCALE, gamma},
                       {DNNL_ARG_SHIFT, beta}, {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var}},
                      Mode::training));
  Op stats;
  stats.what = "bn running stats (loop)";
  stats.mode = Mode::training;
  const double values = double(batch_) * n.out.h * n.out.w;  // per channel
  const float unbias = values > 1 ? float(values / (values - 1)) : 1.0f;  // biased -> unbiased variance
  const float mom = n.bn.momentum;
  stats.fn = [this, soff, c, mean, var, unbias, mom] {
    const float* bm = data(mean);
    const float* bv = data(var);
    float* rm = state_ + soff;
    float* rv = rm + c;
    for (int k = 0; k < c; ++k) {
      rm[k] = (1 - mom) * rm[k] + mom * bm[k];
      rv[k] = (1 - mom) * rv[k] + mom * bv[k] * unbias;
    }
  };
  f.push_back(std::move(stats));
  f.push_back(prim_op(note("bn fwd_inference", ipd), batch_normalization_forward(ipd),
                      {{DNNL_ARG_SRC, act_[p].y}, {DNNL_ARG_DST, act_[i].y}, {DNNL_ARG_SCALE, gamma},
                       {DNNL_ARG_SHIFT, beta}, {DNNL_ARG_MEAN, run_mean}, {DNNL_ARG_VARIANCE, run_var}},
                      Mode::inference));

  // Backward: through the batch statistics after a training forward, through constants after
  // an inference one.
  std::vector<Op>& b = bwd_[i];
  const batch_normalization_backward::primitive_desc tbpd({prop_kind::backward, d, d, eps, flags}, eng_, tpd);
  const batch_normalization_backward::primitive_desc ibpd({prop_kind::backward, d, d, eps, global}, eng_, ipd);
  if (tbpd.diff_src_desc() != ibpd.diff_src_desc() || tbpd.diff_dst_desc() != ibpd.diff_dst_desc())
    throw std::logic_error("batch norm backward primitives disagree on layouts");
  const memory dd = convert(act_[i].dy, tbpd.diff_dst_desc(), b, "reorder diff_dst", i);
  std::vector<Op> post;
  const memory ds = sink(p, first_contribution(p, i, 0), tbpd.diff_src_desc(), post, false);
  const memory dgamma = view(vec_md(c), Buf::grads, param_offset(i, 0));
  const memory dbeta = view(vec_md(c), Buf::grads, param_offset(i, 1));
  auto bargs = [&](const memory& m, const memory& v) {
    return Args{{DNNL_ARG_SRC, act_[p].y}, {DNNL_ARG_MEAN, m},           {DNNL_ARG_VARIANCE, v},
                {DNNL_ARG_DIFF_DST, dd},   {DNNL_ARG_SCALE, gamma},      {DNNL_ARG_SHIFT, beta},
                {DNNL_ARG_DIFF_SRC, ds},   {DNNL_ARG_DIFF_SCALE, dgamma}, {DNNL_ARG_DIFF_SHIFT, dbeta}};
  };
  b.push_back(prim_op(note("bn bwd", tbpd), batch_normalization_backward(tbpd), bargs(mean, var), Mode::training));
  b.push_back(prim_op(note("bn bwd_global", ibpd), batch_normalization_backward(ibpd), bargs(run_mean, run_var),
                      Mode::inference));
  b.insert(b.end(), post.begin(), post.end());
}

void OnednnNetwork::setup_eltwise(int i) {
  using namespace dnnl;
  const Node& n = g_.nodes[i];
  const int p = n.inputs[0];
  // relu6 = clip to [0, 6]; clip_v2's gradient passes where 0 < x < 6, like relu's where x > 0.
  const bool six = n.kind == OpKind::relu6;
  const algorithm alg = six ? algorithm::eltwise_clip_v2 : algorithm::eltwise_relu;
  const float alpha = 0.0f, beta = six ? 6.0f : 0.0f;

  const eltwise_forward::primitive_desc fpd({prop_kind::forward_training, alg, act_[p].md, alpha, beta}, eng_);
  act_[i] = make_act(fpd.dst_desc());
  fwd_[i].push_back(prim_op(note(six ? "relu6 fwd" : "relu fwd", fpd), eltwise_forward(fpd),
                            {{DNNL_ARG_SRC, act_[p].y}, {DNNL_ARG_DST, act_[i].y}}));

  std::vector<Op>& b = bwd_[i];
  const bool dfr = deferred(p);
  const eltwise_backward::primitive_desc bpd({alg, act_[i].md, act_[p].md, alpha, beta}, eng_, fpd);
  const memory dd = convert(act_[i].dy, bpd.diff_dst_desc(), b, "reorder diff_dst", i);
  std::vector<Op> post;
  const memory ds = sink(p, first_contribution(p, i, 0), bpd.diff_src_desc(), post, dfr);
  b.push_back(prim_op(note(six ? "relu6 bwd" : "relu bwd", bpd), eltwise_backward(bpd),
                      {{DNNL_ARG_SRC, act_[p].y}, {DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_DIFF_SRC, ds}}, Mode::always,
                      dfr));
  b.insert(b.end(), post.begin(), post.end());
}

void OnednnNetwork::setup_pool(int i) {
  using namespace dnnl;
  const Node& n = g_.nodes[i];
  const PoolSpec& s = n.pool;
  const int p = n.inputs[0];
  const bool is_max = n.kind == OpKind::max_pool;
  const algorithm alg = is_max             ? algorithm::pooling_max
                        : s.exclude_padding ? algorithm::pooling_avg_exclude_padding
                                            : algorithm::pooling_avg_include_padding;
  const memory::dims strides{s.stride_h, s.stride_w}, kernel{s.kh, s.kw}, pad_l{s.pad.top, s.pad.left},
      pad_r{s.pad.bottom, s.pad.right};
  const std::string family = is_max ? "maxpool" : "avgpool";

  const pooling_forward::primitive_desc fpd(
      {prop_kind::forward_training, alg, act_[p].md, any_md(batch_, n.out), strides, kernel, pad_l, pad_r}, eng_);
  act_[i] = make_act(fpd.dst_desc());
  const memory ws = is_max ? alloc(fpd.workspace_desc()) : memory();
  Args fargs{{DNNL_ARG_SRC, act_[p].y}, {DNNL_ARG_DST, act_[i].y}};
  if (is_max) fargs[DNNL_ARG_WORKSPACE] = ws;
  fwd_[i].push_back(prim_op(note(family + " fwd", fpd), pooling_forward(fpd), std::move(fargs)));

  std::vector<Op>& b = bwd_[i];
  const bool dfr = deferred(p);
  const pooling_backward::primitive_desc bpd({alg, act_[p].md, act_[i].md, strides, kernel, pad_l, pad_r}, eng_, fpd);
  const memory dd = convert(act_[i].dy, bpd.diff_dst_desc(), b, "reorder diff_dst", i);
  std::vector<Op> post;
  const memory ds = sink(p, first_contribution(p, i, 0), bpd.diff_src_desc(), post, dfr);
  Args bargs{{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_DIFF_SRC, ds}};
  if (is_max) bargs[DNNL_ARG_WORKSPACE] = ws;
  b.push_back(prim_op(note(family + " bwd", bpd), pooling_backward(bpd), std::move(bargs), Mode::always, dfr));
  b.insert(b.end(), post.begin(), post.end());
}

void OnednnNetwork::setup_concat(int i) {
  const Node& n = g_.nodes[i];
  // The inputs' common layout when every input's channels fill whole blocks of it (so each
  // input is a channel range of the output, also in backward); else plain NCHW.
  std::vector<Md> srcs;
  Tag common = tag_of(act_[n.inputs[0]].md);
  for (int p : n.inputs) {
    srcs.push_back(act_[p].md);
    if (tag_of(act_[p].md) != common || g_.nodes[p].out.c % channel_block(common) != 0) common = Tag::undef;
  }
  const Md dst(nchw_dims(batch_, n.out), f32, common == Tag::undef ? Tag::nchw : common);
  const dnnl::concat::primitive_desc pd(dst, 1, srcs, eng_);
  act_[i] = make_act(pd.dst_desc());
  Args fargs{{DNNL_ARG_DST, act_[i].y}};
  for (size_t k = 0; k < n.inputs.size(); ++k) fargs[DNNL_ARG_MULTIPLE_SRC + int(k)] = act_[n.inputs[k]].y;
  fwd_[i].push_back(prim_op(note("concat", pd), dnnl::concat(pd), std::move(fargs)));

  // Backward: each input's gradient is its channel range of dy, viewed in place.
  int offset = 0;
  for (int k = 0; k < int(n.inputs.size()); ++k) {
    const int p = n.inputs[k];
    const Dims& d = g_.nodes[p].out;
    const Md part_md = act_[i].md.submemory_desc(nchw_dims(batch_, d), {0, offset, 0, 0});
    const memory part(part_md, eng_, act_[i].dy.get_data_handle());
    fold(p, first_contribution(p, i, k), part, bwd_[i], deferred(p));
    offset += d.c;
  }
}

// The FC runs on plain NCHW input with the plain weights used in place: the weights are often
// the largest tensor there is (lenet's 512 x 3136), and reordering them to a blocked layout
// twice per step (weights in, gradients out) costs more than the product itself, while the
// activation to reorder is batch x c*h*w. Blocked layouts are the fallback.
void OnednnNetwork::setup_fc(int i) {
  using namespace dnnl;
  const Node& n = g_.nodes[i];
  const int p = n.inputs[0];
  const Dims& in = g_.nodes[p].out;
  const int out = n.fc.out_features;
  // Weights [out, c*h*w] in NCHW-flatten order are OIHW with the input's c, h, w.
  const memory::dims wdims{out, in.c, in.h, in.w};
  const Md w_plain_md(wdims, f32, Tag::oihw), w_any(wdims, f32, Tag::any);
  const Md b_md = n.fc.bias ? vec_md(out) : Md();
  const Md dst_md({batch_, out}, f32, Tag::nc);  // the same bytes as the node's N x out x 1 x 1
  const Md src_plain = plain_md(batch_, in), src_any = any_md(batch_, in);

  // Forward.
  inner_product_forward::primitive_desc fpd;
  try {
    fpd = {{prop_kind::forward_training, src_plain, w_plain_md, b_md, dst_md}, eng_};
  } catch (const dnnl::error&) {
    fpd = {{prop_kind::forward_training, act_[p].md, w_any, b_md, dst_md}, eng_};
  }
  std::vector<Op>& f = fwd_[i];
  const memory src = convert(act_[p].y, fpd.src_desc(), f, "reorder src", -1);
  const memory w_plain = view(w_plain_md, Buf::params, param_offset(i, 0));
  const memory w = convert(w_plain, fpd.weights_desc(), f, "reorder weights", -1);
  act_[i] = make_act(plain_md(batch_, n.out));
  const memory y2(dst_md, eng_, act_[i].y.get_data_handle());
  const memory dy2(dst_md, eng_, act_[i].dy.get_data_handle());
  Args fargs{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y2}};
  if (n.fc.bias) fargs[DNNL_ARG_BIAS] = view(b_md, Buf::params, param_offset(i, 1));
  f.push_back(prim_op(note("fc fwd", fpd), inner_product_forward(fpd), std::move(fargs)));

  // Backward data, with the forward's layouts if possible.
  std::vector<Op>& b = bwd_[i];
  const bool dfr = deferred(p);
  inner_product_backward_data::primitive_desc bdpd;
  try {
    bdpd = {{fpd.src_desc(), fpd.weights_desc(), dst_md}, eng_, fpd};
  } catch (const dnnl::error&) {
    bdpd = {{src_any, w_any, dst_md}, eng_, fpd};
  }
  const memory dd = convert(dy2, bdpd.diff_dst_desc(), b, "reorder diff_dst", i);
  const memory wd = convert(w_plain, bdpd.weights_desc(), b, "reorder weights", i, dfr);
  std::vector<Op> post;
  const memory ds = sink(p, first_contribution(p, i, 0), bdpd.diff_src_desc(), post, dfr);
  b.push_back(prim_op(note("fc bwd_data", bdpd), inner_product_backward_data(bdpd),
                      {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, wd}, {DNNL_ARG_DIFF_SRC, ds}}, Mode::always, dfr));
  b.insert(b.end(), post.begin(), post.end());

  // Backward weights, into the flat gradient buffer directly if possible.
  inner_product_backward_weights::primitive_desc bwpd;
  try {
    bwpd = {{fpd.src_desc(), w_plain_md, b_md, dst_md}, eng_, fpd};
  } catch (const dnnl::error&) {
    bwpd = {{fpd.src_desc(), w_any, b_md, dst_md}, eng_, fpd};
  }
  const memory src_w = convert(src, bwpd.src_desc(), b, "reorder src", i);
  const memory dd_w = convert(dy2, bwpd.diff_dst_desc(), b, "reorder diff_dst", i);
  const memory gw_plain = view(w_plain_md, Buf::grads, param_offset(i, 0));
  const memory gw = bwpd.diff_weights_desc() == w_plain_md ? gw_plain : alloc(bwpd.diff_weights_desc());
  Args wargs{{DNNL_ARG_SRC, src_w}, {DNNL_ARG_DIFF_DST, dd_w}, {DNNL_ARG_DIFF_WEIGHTS, gw}};
  if (n.fc.bias) wargs[DNNL_ARG_DIFF_BIAS] = view(b_md, Buf::grads, param_offset(i, 1));
  b.push_back(prim_op(note("fc bwd_weights", bwpd), inner_product_backward_weights(bwpd), std::move(wargs)));
  if (gw.get() != gw_plain.get()) weights_to_plain(gw, gw_plain, b);
}

// Dropout runs as host loops on plain NCHW (it sits on small tensors before a classifier), with
// the masks every backend draws from dropout_keep().
void OnednnNetwork::setup_dropout(int i) {
  const Node& n = g_.nodes[i];
  const int p = n.inputs[0];
  const Md pm = plain_md(batch_, n.out);
  const int64_t per_sample = n.out.numel();
  const size_t count = size_t(batch_) * size_t(per_sample);
  const float rate = n.dropout.rate;
  const float scale = 1.0f / (1.0f - rate);
  DeviceVector<float>& mask = dropout_mask_[size_t(i)];
  mask.assign(count, 0.0f);

  std::vector<Op>& f = fwd_[i];
  const memory src = convert(act_[p].y, pm, f, "reorder src", -1);
  act_[i] = make_act(pm);
  const memory y = act_[i].y;
  Op train;
  train.what = "dropout fwd (loop)";
  train.mode = Mode::training;
  train.fn = [this, i, src, y, per_sample, rate, scale, &mask] {
    const float* x = data(src);
    float* out = data(y);
#pragma omp parallel for schedule(static)
    for (int s = 0; s < batch_; ++s)
      for (int64_t e = 0; e < per_sample; ++e) {
        const size_t k = size_t(s * per_sample + e);
        const bool keep = dropout_keep(args_.seed, args_.step, i, args_.sample_offset + s, e, rate);
        mask[k] = keep ? scale : 0.0f;
        out[k] = keep ? x[k] * scale : 0.0f;
      }
  };
  f.push_back(std::move(train));
  Op infer;
  infer.what = "dropout fwd_inference (copy)";
  infer.mode = Mode::inference;
  infer.fn = [src, y, count] { std::memcpy(data(y), data(src), count * sizeof(float)); };
  f.push_back(std::move(infer));

  std::vector<Op>& b = bwd_[i];
  const bool dfr = deferred(p);
  std::vector<Op> post;
  const memory ds = sink(p, first_contribution(p, i, 0), pm, post, dfr);
  const memory dy = act_[i].dy;
  Op btrain;
  btrain.what = "dropout bwd (loop)";
  btrain.mode = Mode::training;
  btrain.input_grad_only = dfr;
  btrain.fn = [ds, dy, count, &mask] {
    const float* g = data(dy);
    float* dx = data(ds);
    for (size_t k = 0; k < count; ++k) dx[k] = g[k] * mask[k];
  };
  b.push_back(std::move(btrain));
  Op binfer;
  binfer.what = "dropout bwd_inference (copy)";
  binfer.mode = Mode::inference;
  binfer.input_grad_only = dfr;
  binfer.fn = [ds, dy, count] { std::memcpy(data(ds), data(dy), count * sizeof(float)); };
  b.push_back(std::move(binfer));
  b.insert(b.end(), post.begin(), post.end());
}

void OnednnNetwork::setup_outputs() {
  for (size_t k = 0; k < g_.outputs.size(); ++k) {
    const int p = g_.outputs[k].node;
    const Md plain = plain_md(batch_, g_.nodes[p].out);
    out_dy_.push_back(alloc(plain));
    bool first = true;
    for (size_t j = 0; j < k; ++j) first = first && g_.outputs[j].node != p;
    fold(p, first, out_dy_.back(), out_grad_ops_, false);
    OutputIo io{plain, {}};
    if (act_[p].md != plain) io.to_plain = dnnl::reorder(dnnl::reorder::primitive_desc(eng_, act_[p].md, eng_, plain));
    out_io_.push_back(std::move(io));
  }
  out_dy_set_.assign(g_.outputs.size(), false);
}

std::string OnednnNetwork::describe() const {
  return describe_impls("onednn", impls_);
}

// ---------------------------------------------------------------------------------------------
// Execution

void OnednnNetwork::bind(float* params, float* grads, float* state) {
  check_bind_args(g_, params, grads, state, "onednn network");
  state_ = state;
  for (const View& v : views_) {
    float* base = v.buf == Buf::params ? params : v.buf == Buf::grads ? grads : state;
    v.mem.set_data_handle(base + v.offset);
  }
  bound_ = true;
  forwarded_ = backwarded_ = false;
}

void OnednnNetwork::set_input(const float* x) {
  std::memcpy(act_[0].y.get_data_handle(), x, act_[0].md.get_size());
}

void OnednnNetwork::forward(const ForwardArgs& args) {
  if (!bound_) throw std::logic_error("onednn network: forward() called before bind()");
  args_ = args;
  for (size_t i = 1; i < fwd_.size(); ++i) {
    if (gate_) {
      strm_.wait();
      gate_->checkpoint();
    }
    const auto begin = trace_ ? Clock::now() : Clock::time_point{};
    for (const Op& op : fwd_[i])
      if (active(op.mode, args.training)) run(op);
    if (trace_) {
      strm_.wait();
      trace_(int(i), Phase::forward, begin, Clock::now());
    }
  }
  strm_.wait();
  last_training_ = args.training;
  forwarded_ = true;
  backwarded_ = false;
}

void OnednnNetwork::get_output(size_t i, float* y) {
  check_output_index(g_, i, "get_output()", "onednn network");
  if (!forwarded_) throw std::logic_error("onednn network: get_output() called before forward()");
  const Act& a = act_[size_t(g_.outputs[i].node)];
  const OutputIo& io = out_io_[i];
  if (io.to_plain) {
    memory src = a.y, dst(io.plain, eng_, y);
    io.to_plain.execute(strm_, src, dst);
    strm_.wait();
  } else {
    std::memcpy(y, a.y.get_data_handle(), io.plain.get_size());
  }
}

void OnednnNetwork::set_output_grad(size_t i, const float* dy) {
  check_output_index(g_, i, "set_output_grad()", "onednn network");
  std::memcpy(out_dy_[i].get_data_handle(), dy, out_io_[i].plain.get_size());
  out_dy_set_[i] = true;
}

void OnednnNetwork::backward(const std::function<void(int node)>& on_param_grads) {
  if (!bound_) throw std::logic_error("onednn network: backward() called before bind()");
  if (!forwarded_) throw std::logic_error("onednn network: backward() called before forward()");
  for (size_t k = 0; k < out_dy_.size(); ++k) {
    if (!out_dy_set_[k]) std::memset(out_dy_[k].get_data_handle(), 0, out_io_[k].plain.get_size());
    out_dy_set_[k] = false;  // outputs not set before the next backward get zero
  }
  for (const Op& op : out_grad_ops_) run(op);
  for (size_t i = bwd_.size() - 1; i >= 1; --i) {
    if (gate_) gate_->checkpoint();
    const auto begin = trace_ ? Clock::now() : Clock::time_point{};
    for (const Op& op : bwd_[i])
      if (!op.input_grad_only && active(op.mode, last_training_)) run(op);
    strm_.wait();
    const auto end = trace_ ? Clock::now() : Clock::time_point{};
    if (on_param_grads && !g_.nodes[i].params.empty()) on_param_grads(int(i));
    if (trace_) trace_(int(i), Phase::backward, begin, end);
  }
  backwarded_ = true;
  input_grad_ready_ = !has_deferred_;
}

void OnednnNetwork::get_input_grad(float* dx) {
  if (!backwarded_) throw std::logic_error("onednn network: get_input_grad() called before backward()");
  if (!input_grad_ready_) {  // the ops that feed only the input gradient, skipped by backward()
    for (size_t i = bwd_.size() - 1; i >= 1; --i)
      for (const Op& op : bwd_[i])
        if (op.input_grad_only && active(op.mode, last_training_)) run(op);
    strm_.wait();
    input_grad_ready_ = true;
  }
  std::memcpy(dx, act_[0].dy.get_data_handle(), act_[0].md.get_size());
}

// ---------------------------------------------------------------------------------------------
// Profiling

std::vector<PrimitiveTime> OnednnNetwork::profile(int reps) {
  // The ops of a training step, in the order forward() and backward() run them.
  struct Entry {
    const Op* op;
    int node;
    Phase phase;
  };
  std::vector<Entry> step;
  for (size_t i = 1; i < fwd_.size(); ++i)
    for (const Op& op : fwd_[i])
      if (active(op.mode, true)) step.push_back({&op, int(i), Phase::forward});
  for (const Op& op : out_grad_ops_) step.push_back({&op, -1, Phase::backward});
  for (size_t i = bwd_.size() - 1; i >= 1; --i)
    for (const Op& op : bwd_[i])
      if (!op.input_grad_only && active(op.mode, true)) step.push_back({&op, int(i), Phase::backward});

  auto timed = [&](const Op& op) {
    const auto begin = Clock::now();
    run(op);
    strm_.wait();
    return std::chrono::duration<double>(Clock::now() - begin).count();
  };
  auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  // Within whole steps, then each op alone.
  std::vector<std::vector<double>> in_step(step.size());
  for (int r = 0; r < reps; ++r)
    for (size_t k = 0; k < step.size(); ++k) in_step[k].push_back(timed(*step[k].op));
  std::vector<PrimitiveTime> out;
  std::vector<double> alone(static_cast<size_t>(reps));
  for (size_t k = 0; k < step.size(); ++k) {
    for (double& t : alone) t = timed(*step[k].op);
    const std::string node = step[k].node < 0 ? "(outputs)" : g_.nodes[size_t(step[k].node)].name;
    out.push_back({node, step[k].op->what, step[k].phase, median(alone), median(in_step[k])});
  }
  return out;
}

}  // namespace

std::unique_ptr<Network> make_onednn_network(const Graph& g, int batch) {
  return std::make_unique<OnednnNetwork>(g, batch);
}

std::vector<PrimitiveTime> profile_onednn_primitives(const Graph& g, int batch, int reps) {
  if (reps < 1) throw std::invalid_argument("profile_onednn_primitives: reps must be >= 1");
  OnednnNetwork net(g, batch);
  std::vector<float> params(g.param_count), grads(g.param_count), state(g.state_count);
  init_params(g, 1, params.data(), state.data());
  net.bind(params.data(), grads.data(), state.data());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(size_t(batch) * size_t(g.input_dims().numel()));
  for (float& v : x) v = u(rng);
  net.set_input(x.data());
  net.forward({.training = true, .seed = 1});
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    std::vector<float> dy(size_t(batch) * size_t(g.output_node(k).out.numel()));
    for (float& v : dy) v = 0.01f * u(rng);
    net.set_output_grad(k, dy.data());
  }
  net.backward({});
  return net.profile(reps);
}

}  // namespace ringbench::models
