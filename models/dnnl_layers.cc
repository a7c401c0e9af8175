// The oneDNN backend's setup of each op family (dnnl_network.cc has the overview): the forward
// and backward plans of one node, with the layouts its primitives pick.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "models/dnnl_network_impl.h"

namespace ringbench::models::onednn {

// A weighted layer's (conv, fc) input gradient: dy and the plain weights in the layouts `pd`
// wants, the result written or folded into the input's dy.
template <class Primitive>
void OnednnNetwork::plan_backward_data(int i, const typename Primitive::primitive_desc& pd, const WeightedIo& io,
                                       const std::string& family) {
  const int p = g_.nodes[i].inputs[0];
  std::vector<Op>& b = bwd_[i];
  const bool dfr = deferred(p);
  const memory dd = convert(io.dy, pd.diff_dst_desc(), b, "reorder diff_dst", i);
  const memory wd = convert(io.w_forward ? io.w_forward : io.w_master, pd.weights_desc(), b, "reorder weights", i, dfr);
  std::vector<Op> post;
  const memory ds = sink(p, first_contribution(p, i, 0), pd.diff_src_desc(), post, dfr);
  b.push_back(prim_op(note(family, pd), Primitive(pd),
                      {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_WEIGHTS, wd}, {DNNL_ARG_DIFF_SRC, ds}}, Mode::always, dfr));
  b.insert(b.end(), post.begin(), post.end());
}

// A weighted layer's weight (and bias) gradients, into the flat gradient buffer: directly where
// `pd` produces the master weights' layout, else through weights_to_master().
template <class Primitive>
void OnednnNetwork::plan_backward_weights(int i, const typename Primitive::primitive_desc& pd, const WeightedIo& io,
                                          const std::string& family) {
  planning_weights_ = true;
  need_weights_scratch(pd);
  std::vector<Op>& b = bwd_[i];
  const memory src_w = convert(io.src, pd.src_desc(), b, "reorder src", i);
  const memory dd_w = convert(io.dy, pd.diff_dst_desc(), b, "reorder diff_dst", i);
  const memory gw_master = view(io.w_master_md, Buf::grads, param_offset(i, 0));
  const memory gw = pd.diff_weights_desc() == io.w_master_md ? gw_master : alloc(pd.diff_weights_desc());
  Args wargs{{DNNL_ARG_SRC, src_w}, {DNNL_ARG_DIFF_DST, dd_w}, {DNNL_ARG_DIFF_WEIGHTS, gw}};
  if (io.bias) wargs[DNNL_ARG_DIFF_BIAS] = view(io.b_md, Buf::grads, param_offset(i, 1));
  b.push_back(prim_op(note(family, pd), Primitive(pd), std::move(wargs)));
  if (gw.get() != gw_master.get()) weights_to_master(gw, gw_master, b);
  planning_weights_ = false;
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
  // bf16 training: the fp32 master weights (and their gradients and momentum) as bwd_weights
  // writes them, where that needs no padding; every rank picks the same (param_layout.h).
  const bool blocked = blocked_weights_ && !grouped && blockable(s.out_channels, in.c);
  const Md w_master_md = blocked ? Md(wdims, f32, Tag::OIhw16i16o) : w_plain_md;
  if (blocked) param_layout_.blocked.push_back({param_offset(i, 0), s.out_channels, in.c, s.kh, s.kw});
  // Weights in the network's type (reordered from the fp32 flat parameters each forward); their
  // gradients and the bias in fp32 (bf16: oneDNN accumulates them in fp32).
  const Md w_any(wdims, dt_, Tag::any), dw_any(wdims, f32, Tag::any);
  const Md b_md = s.bias ? vec_md(s.out_channels) : Md();
  const Md src_any = any(in), dst_any = any(n.out);
  const auto alg = algorithm::convolution_direct;

  // Forward.
  const convolution_forward::primitive_desc fpd(
      {prop_kind::forward_training, alg, src_any, w_any, b_md, dst_any, strides, pad_l, pad_r}, eng_);
  std::vector<Op>& f = fwd_[i];
  const memory w_master = view(w_master_md, Buf::params, param_offset(i, 0));
  const memory w = convert(w_master, fpd.weights_desc(), weight_ops(f), "reorder weights", -1);
  const memory src = convert(act_[p].y, fpd.src_desc(), f, "reorder src", -1);
  act_[i] = make_act(fpd.dst_desc());
  Args fargs{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, act_[i].y}};
  if (s.bias) fargs[DNNL_ARG_BIAS] = view(b_md, Buf::params, param_offset(i, 1));
  f.push_back(prim_op(note("conv fwd", fpd), convolution_forward(fpd), std::move(fargs)));
  if (inference_) return;

  // Backward data (first: it reads the weights, which may change once the gradients are out).
  const WeightedIo io{src, act_[i].dy, w_master, w_master_md, b_md, s.bias, dt_ == f32 ? memory() : w};
  const convolution_backward_data::primitive_desc bdpd({alg, src_any, w_any, dst_any, strides, pad_l, pad_r}, eng_,
                                                       fpd);
  plan_backward_data<convolution_backward_data>(i, bdpd, io, "conv bwd_data");

  // Backward weights.
  const convolution_backward_weights::primitive_desc bwpd(
      {alg, src_any, dw_any, b_md, dst_any, strides, pad_l, pad_r}, weights_attr(), eng_, fpd);
  plan_backward_weights<convolution_backward_weights>(i, bwpd, io, "conv bwd_weights");
}

// A training forward's update of node i's running statistics from the batch statistics.
Op OnednnNetwork::running_stats_op(int i, const memory& mean, const memory& var) {
  const Node& n = g_.nodes[i];
  const int c = n.out.c;
  const size_t soff = g_.state.at(size_t(n.state)).offset;
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
  return stats;
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
  const memory mean = inference_ ? memory() : alloc(tpd.mean_desc());  // batch statistics
  const memory var = inference_ ? memory() : alloc(tpd.variance_desc());

  // Forward: batch statistics and the running-statistics update in training, else the
  // running statistics.
  std::vector<Op>& f = fwd_[i];
  if (!inference_) {
    f.push_back(prim_op(note("bn fwd", tpd), batch_normalization_forward(tpd),
                        {{DNNL_ARG_SRC, act_[p].y}, {DNNL_ARG_DST, act_[i].y}, {DNNL_ARG_SCALE, gamma},
                         {DNNL_ARG_SHIFT, beta}, {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var}},
                        Mode::training));
    f.push_back(running_stats_op(i, mean, var));
  }
  f.push_back(prim_op(note("bn fwd_inference", ipd), batch_normalization_forward(ipd),
                      {{DNNL_ARG_SRC, act_[p].y}, {DNNL_ARG_DST, act_[i].y}, {DNNL_ARG_SCALE, gamma},
                       {DNNL_ARG_SHIFT, beta}, {DNNL_ARG_MEAN, run_mean}, {DNNL_ARG_VARIANCE, run_var}},
                      Mode::inference));
  if (inference_) return;

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
  if (inference_) return;

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

  // forward_inference where there is no backward: max pooling then keeps no workspace.
  const prop_kind prop = inference_ ? prop_kind::forward_inference : prop_kind::forward_training;
  const pooling_forward::primitive_desc fpd(
      {prop, alg, act_[p].md, any(n.out), strides, kernel, pad_l, pad_r}, eng_);
  act_[i] = make_act(fpd.dst_desc());
  const memory ws = is_max && !inference_ ? alloc(fpd.workspace_desc()) : memory();
  Args fargs{{DNNL_ARG_SRC, act_[p].y}, {DNNL_ARG_DST, act_[i].y}};
  if (ws) fargs[DNNL_ARG_WORKSPACE] = ws;
  fwd_[i].push_back(prim_op(note(family + " fwd", fpd), pooling_forward(fpd), std::move(fargs)));
  if (inference_) return;

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
    if (act_[p].md.data_type() != dt_) throw std::logic_error("concat: an input of another data type");
    if (tag_of(act_[p].md) != common || g_.nodes[p].out.c % channel_block(common) != 0) common = Tag::undef;
  }
  const Md dst(nchw_dims(batch_, n.out), dt_, common == Tag::undef ? Tag::nchw : common);
  const dnnl::concat::primitive_desc pd(dst, 1, srcs, eng_);
  act_[i] = make_act(pd.dst_desc());
  Args fargs{{DNNL_ARG_DST, act_[i].y}};
  for (size_t k = 0; k < n.inputs.size(); ++k) fargs[DNNL_ARG_MULTIPLE_SRC + int(k)] = act_[n.inputs[k]].y;
  fwd_[i].push_back(prim_op(note("concat", pd), dnnl::concat(pd), std::move(fargs)));
  if (inference_) return;

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
// activation to reorder is batch x c*h*w. Blocked layouts are the fallback. In bf16 the weights
// are converted each forward anyway, into the layout the product prefers; their gradients go
// straight into the flat fp32 buffer.
void OnednnNetwork::setup_fc(int i) {
  using namespace dnnl;
  const Node& n = g_.nodes[i];
  const int p = n.inputs[0];
  const Dims& in = g_.nodes[p].out;
  const int out = n.fc.out_features;
  // Weights [out, c*h*w] in NCHW-flatten order are OIHW with the input's c, h, w.
  const memory::dims wdims{out, in.c, in.h, in.w};
  const Md w_plain_md(wdims, f32, Tag::oihw), w_any(wdims, dt_, Tag::any), dw_any(wdims, f32, Tag::any);
  const Md w_fwd = dt_ == f32 ? w_plain_md : w_any;
  const Md b_md = n.fc.bias ? vec_md(out) : Md();
  const Md dst_md({batch_, out}, dt_, Tag::nc);  // the same bytes as the node's N x out x 1 x 1
  const Md src_plain = plain(in), src_any = any(in);

  // Forward.
  inner_product_forward::primitive_desc fpd;
  try {
    fpd = {{prop_kind::forward_training, src_plain, w_fwd, b_md, dst_md}, eng_};
  } catch (const dnnl::error&) {
    fpd = {{prop_kind::forward_training, act_[p].md, w_any, b_md, dst_md}, eng_};
  }
  std::vector<Op>& f = fwd_[i];
  const memory src = convert(act_[p].y, fpd.src_desc(), f, "reorder src", -1);
  const memory w_plain = view(w_plain_md, Buf::params, param_offset(i, 0));
  const memory w = convert(w_plain, fpd.weights_desc(), weight_ops(f), "reorder weights", -1);
  act_[i] = make_act(plain(n.out));
  const memory y2(dst_md, eng_, act_[i].y.get_data_handle());
  Args fargs{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y2}};
  if (n.fc.bias) fargs[DNNL_ARG_BIAS] = view(b_md, Buf::params, param_offset(i, 1));
  f.push_back(prim_op(note("fc fwd", fpd), inner_product_forward(fpd), std::move(fargs)));
  if (inference_) return;

  // Backward data, with the forward's layouts if possible.
  const memory dy2(dst_md, eng_, act_[i].dy.get_data_handle());
  const WeightedIo io{src, dy2, w_plain, w_plain_md, b_md, n.fc.bias};
  inner_product_backward_data::primitive_desc bdpd;
  try {
    bdpd = {{fpd.src_desc(), fpd.weights_desc(), dst_md}, eng_, fpd};
  } catch (const dnnl::error&) {
    bdpd = {{src_any, w_any, dst_md}, eng_, fpd};
  }
  plan_backward_data<inner_product_backward_data>(i, bdpd, io, "fc bwd_data");

  // Backward weights, into the flat gradient buffer directly if possible.
  inner_product_backward_weights::primitive_desc bwpd;
  try {
    bwpd = {{fpd.src_desc(), w_plain_md, b_md, dst_md}, weights_attr(), eng_, fpd};
  } catch (const dnnl::error&) {
    bwpd = {{fpd.src_desc(), dw_any, b_md, dst_md}, weights_attr(), eng_, fpd};
  }
  plan_backward_weights<inner_product_backward_weights>(i, bwpd, io, "fc bwd_weights");
}

namespace {

// Element k of a host loop's tensor as fp32, and back (bf16: rounded to nearest even).
inline float get(const float* t, size_t k) { return t[k]; }
inline float get(const uint16_t* t, size_t k) { return bf16_to_float(t[k]); }
inline void put(float* t, size_t k, float v) { t[k] = v; }
inline void put(uint16_t* t, size_t k, float v) { t[k] = float_to_bf16(v); }

// Calls f(T*...) with the data of the memories, T their (common) data type's: float or uint16_t.
template <class F, class... M>
void with_data(Dt dt, F&& f, const M&... m) {
  if (dt == bf16) f(data<uint16_t>(m)...);
  else f(data<float>(m)...);
}

}  // namespace

// Dropout runs as host loops on plain NCHW in the network's type (it sits on small tensors
// before a classifier; bf16: each element's product in fp32, rounded as a bf16 kernel's), with
// the masks every backend draws from dropout_keep().
void OnednnNetwork::setup_dropout(int i) {
  const Node& n = g_.nodes[i];
  const int p = n.inputs[0];
  const Md pm = plain(n.out);
  const int64_t per_sample = n.out.numel();
  const size_t count = size_t(batch_) * size_t(per_sample);
  const float rate = n.dropout.rate;
  const float scale = 1.0f / (1.0f - rate);
  const Dt dt = dt_;
  DeviceVector<float>& mask = dropout_mask_[size_t(i)];
  if (!inference_) mask.assign(count, 0.0f);

  std::vector<Op>& f = fwd_[i];
  const memory src = convert(act_[p].y, pm, f, "reorder src", -1);
  act_[i] = make_act(pm);
  const memory y = act_[i].y;
  Op infer;
  infer.what = "dropout fwd_inference (copy)";
  infer.mode = Mode::inference;
  infer.fn = [src, y] { std::memcpy(y.get_data_handle(), src.get_data_handle(), y.get_desc().get_size()); };
  if (inference_) {
    f.push_back(std::move(infer));
    return;
  }
  Op train;
  train.what = "dropout fwd (loop)";
  train.mode = Mode::training;
  train.fn = [this, i, src, y, per_sample, rate, scale, dt, &mask] {
    with_data(
        dt,
        [&](const auto* x, auto* out) {
#pragma omp parallel for schedule(static)
          for (int s = 0; s < batch_; ++s)
            for (int64_t e = 0; e < per_sample; ++e) {
              const size_t k = size_t(s * per_sample + e);
              const bool keep = dropout_keep(args_.seed, args_.step, i, args_.sample_offset + s, e, rate);
              mask[k] = keep ? scale : 0.0f;
              put(out, k, keep ? get(x, k) * scale : 0.0f);
            }
        },
        src, y);
  };
  f.push_back(std::move(train));
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
  btrain.fn = [ds, dy, count, dt, &mask] {
    with_data(
        dt,
        [&](auto* dx, const auto* g) {
          for (size_t k = 0; k < count; ++k) put(dx, k, get(g, k) * mask[k]);
        },
        ds, dy);
  };
  b.push_back(std::move(btrain));
  Op binfer;
  binfer.what = "dropout bwd_inference (copy)";
  binfer.mode = Mode::inference;
  binfer.input_grad_only = dfr;
  binfer.fn = [ds, dy] { std::memcpy(ds.get_data_handle(), dy.get_data_handle(), dy.get_desc().get_size()); };
  b.push_back(std::move(binfer));
  b.insert(b.end(), post.begin(), post.end());
}

}  // namespace ringbench::models::onednn
