// The reference backend: every op as plain loops over NCHW float32 buffers, one activation
// and one gradient buffer per node, sums accumulated in double. It is slow on purpose and
// meant to be read: it is the numerical oracle the oneDNN (and later CUDA) backends are
// tested against.
//
// File layout: index helpers, then one small forward/backward pair per op, then the executor
// (ReferenceNetwork) that walks the graph.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/backends.h"
#include "base/device_memory.h"

namespace ringbench::models {
namespace {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Indexing

// Offset of element (n, c, y, x) in a batch of NCHW tensors of per-sample shape d.
int64_t at(const Dims& d, int n, int c, int y, int x) {
  return ((int64_t(n) * d.c + c) * d.h + y) * d.w + x;
}

// The taps of one sliding window along one axis that fall inside the image: window `o` covers
// input positions start + k for k in [0, kernel); the ones inside are k in [lo, hi).
struct Window {
  int start = 0, lo = 0, hi = 0;
};

Window window(int o, int stride, int pad_lo, int kernel, int in) {
  Window w;
  w.start = o * stride - pad_lo;
  w.lo = std::max(0, -w.start);
  w.hi = std::min(kernel, in - w.start);
  return w;
}

// ---------------------------------------------------------------------------------------------
// Convolution: weights OIHW [out, in/groups, kh, kw], optional bias [out].

int64_t conv_weight_index(const ConvSpec& s, int cin_per_group, int o, int ci, int ky, int kx) {
  return ((int64_t(o) * cin_per_group + ci) * s.kh + ky) * s.kw + kx;
}

// Calls f(n, o, oy, ox, c0, wy, wx) for every output element (sample n, channel o, position
// oy, ox), where c0 is the first input channel of o's group and wy, wx the kernel's window.
template <class F>
void for_each_output(const ConvSpec& s, const Dims& in, const Dims& out, int batch, F f) {
  const int cin_g = in.c / s.groups, cout_g = out.c / s.groups;
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < out.c; ++o)
      for (int oy = 0; oy < out.h; ++oy) {
        const Window wy = window(oy, s.stride_h, s.pad.top, s.kh, in.h);
        for (int ox = 0; ox < out.w; ++ox)
          f(n, o, oy, ox, (o / cout_g) * cin_g, wy, window(ox, s.stride_w, s.pad.left, s.kw, in.w));
      }
}

void conv_forward(const ConvSpec& s, const Dims& in, const Dims& out, int batch, const float* x,
                  const float* w, const float* b, float* y) {
  const int cin_g = in.c / s.groups;
  for_each_output(s, in, out, batch, [&](int n, int o, int oy, int ox, int c0, const Window& wy, const Window& wx) {
    double acc = b ? double(b[o]) : 0.0;
    for (int ci = 0; ci < cin_g; ++ci)
      for (int ky = wy.lo; ky < wy.hi; ++ky)
        for (int kx = wx.lo; kx < wx.hi; ++kx)
          acc += double(w[conv_weight_index(s, cin_g, o, ci, ky, kx)]) *
                 double(x[at(in, n, c0 + ci, wy.start + ky, wx.start + kx)]);
    y[at(out, n, o, oy, ox)] = float(acc);
  });
}

// dx is accumulated into (+=); dw and db (when not null) are overwritten.
void conv_backward(const ConvSpec& s, const Dims& in, const Dims& out, int batch, const float* x,
                   const float* w, const float* dy, float* dx, float* dw, float* db) {
  const int cin_g = in.c / s.groups;
  std::vector<double> dwd(size_t(out.c) * cin_g * s.kh * s.kw, 0.0);
  std::vector<double> dbd(size_t(out.c), 0.0);
  DeviceVector<double> dxd(size_t(batch) * size_t(in.numel()), 0.0, DeviceAllocator<double>("conv backward workspace"));
  for_each_output(s, in, out, batch, [&](int n, int o, int oy, int ox, int c0, const Window& wy, const Window& wx) {
    const double g = dy[at(out, n, o, oy, ox)];
    dbd[o] += g;
    for (int ci = 0; ci < cin_g; ++ci)
      for (int ky = wy.lo; ky < wy.hi; ++ky)
        for (int kx = wx.lo; kx < wx.hi; ++kx) {
          const int64_t wi = conv_weight_index(s, cin_g, o, ci, ky, kx);
          const int64_t xi = at(in, n, c0 + ci, wy.start + ky, wx.start + kx);
          dwd[wi] += g * double(x[xi]);
          dxd[xi] += g * double(w[wi]);
        }
  });
  for (size_t i = 0; i < dwd.size(); ++i) dw[i] = float(dwd[i]);
  if (db)
    for (size_t i = 0; i < dbd.size(); ++i) db[i] = float(dbd[i]);
  for (size_t i = 0; i < dxd.size(); ++i) dx[i] += float(dxd[i]);
}

// ---------------------------------------------------------------------------------------------
// Batch normalisation, per channel over N*H*W. `running` is the node's state: running mean
// [c] then running variance [c].

struct BnSaved {
  bool training = true;          // batch statistics (else running statistics) were used
  std::vector<double> mean, invstd;  // per channel, as used by the forward
};

void bn_forward(const BatchNormSpec& s, const Dims& d, int batch, bool training, const float* x,
                const float* gamma, const float* beta, float* running, float* y, BnSaved& saved) {
  const int64_t m = int64_t(batch) * d.h * d.w;  // values per channel
  float* running_mean = running;
  float* running_var = running + d.c;
  saved.training = training;
  saved.mean.assign(size_t(d.c), 0.0);
  saved.invstd.assign(size_t(d.c), 0.0);
  for (int c = 0; c < d.c; ++c) {
    double mean = 0, var = 0;
    if (training) {
      for (int n = 0; n < batch; ++n)
        for (int i = 0; i < d.h * d.w; ++i) mean += double(x[at(d, n, c, 0, 0) + i]);
      mean /= double(m);
      for (int n = 0; n < batch; ++n)
        for (int i = 0; i < d.h * d.w; ++i) {
          const double dev = double(x[at(d, n, c, 0, 0) + i]) - mean;
          var += dev * dev;
        }
      var /= double(m);  // biased: used to normalise
      // With a single value per channel the unbiased variance is undefined; use the biased one.
      const double unbiased = m > 1 ? var * double(m) / double(m - 1) : var;
      const double mom = double(s.momentum);
      running_mean[c] = float((1 - mom) * double(running_mean[c]) + mom * mean);
      running_var[c] = float((1 - mom) * double(running_var[c]) + mom * unbiased);
    } else {
      mean = double(running_mean[c]);
      var = double(running_var[c]);
    }
    const double invstd = 1.0 / std::sqrt(var + double(s.eps));
    saved.mean[c] = mean;
    saved.invstd[c] = invstd;
    for (int n = 0; n < batch; ++n)
      for (int i = 0; i < d.h * d.w; ++i) {
        const int64_t k = at(d, n, c, 0, 0) + i;
        y[k] = float(double(gamma[c]) * (double(x[k]) - mean) * invstd + double(beta[c]));
      }
  }
}

// dx accumulated; dgamma and dbeta overwritten. In training mode the batch statistics depend
// on x, which gives the full formula
//   dx = gamma * invstd / M * (M * dy - sum(dy) - xhat * sum(dy * xhat));
// after an inference forward they are constants and dx = gamma * invstd * dy.
void bn_backward(const Dims& d, int batch, const BnSaved& saved, const float* x, const float* gamma,
                 const float* dy, float* dx, float* dgamma, float* dbeta) {
  const double m = double(int64_t(batch) * d.h * d.w);
  for (int c = 0; c < d.c; ++c) {
    const double mean = saved.mean[c], invstd = saved.invstd[c];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int n = 0; n < batch; ++n)
      for (int i = 0; i < d.h * d.w; ++i) {
        const int64_t k = at(d, n, c, 0, 0) + i;
        sum_dy += double(dy[k]);
        sum_dy_xhat += double(dy[k]) * (double(x[k]) - mean) * invstd;
      }
    dbeta[c] = float(sum_dy);
    dgamma[c] = float(sum_dy_xhat);
    const double scale = double(gamma[c]) * invstd;
    for (int n = 0; n < batch; ++n)
      for (int i = 0; i < d.h * d.w; ++i) {
        const int64_t k = at(d, n, c, 0, 0) + i;
        if (saved.training) {
          const double xhat = (double(x[k]) - mean) * invstd;
          dx[k] += float(scale / m * (m * double(dy[k]) - sum_dy - xhat * sum_dy_xhat));
        } else {
          dx[k] += float(scale * double(dy[k]));
        }
      }
  }
}

// ---------------------------------------------------------------------------------------------
// ReLU (cap = +inf) and ReLU6 (cap = 6): y = min(max(x, 0), cap); the gradient passes where
// 0 < x < cap.

void clamp_forward(int64_t count, float cap, const float* x, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = x[i] > 0 ? std::min(x[i], cap) : 0.0f;
}

void clamp_backward(int64_t count, float cap, const float* x, const float* dy, float* dx) {
  for (int64_t i = 0; i < count; ++i)
    if (x[i] > 0 && x[i] < cap) dx[i] += dy[i];
}

// ---------------------------------------------------------------------------------------------
// Pooling: f(n, c, o, wy, wx) for every output element, o its offset in the batch buffer (of
// per-sample shape `out`), wy and wx its window's taps.

template <class F>
void for_each_pool_window(const PoolSpec& s, const Dims& in, const Dims& out, int batch, F f) {
  for (int n = 0; n < batch; ++n)
    for (int c = 0; c < out.c; ++c)
      for (int oy = 0; oy < out.h; ++oy) {
        const Window wy = window(oy, s.stride_h, s.pad.top, s.kh, in.h);
        for (int ox = 0; ox < out.w; ++ox)
          f(n, c, at(out, n, c, oy, ox), wy, window(ox, s.stride_w, s.pad.left, s.kw, in.w));
      }
}

// Max pooling: only taps inside the image compete (padding never wins); ties go to the first
// tap in row-major window order, which also receives the whole gradient. `argmax` holds, per
// output element, the offset of the winning input element in the batch buffer (for backward:
// nullptr in an inference-only network).

void max_pool_forward(const PoolSpec& s, const Dims& in, const Dims& out, int batch, const float* x,
                      float* y, DeviceVector<int64_t>* argmax) {
  if (argmax) argmax->assign(size_t(batch) * size_t(out.numel()), -1);
  for_each_pool_window(s, in, out, batch, [&](int n, int c, int64_t o, const Window& wy, const Window& wx) {
    int64_t best = -1;
    for (int ky = wy.lo; ky < wy.hi; ++ky)
      for (int kx = wx.lo; kx < wx.hi; ++kx) {
        const int64_t k = at(in, n, c, wy.start + ky, wx.start + kx);
        if (best < 0 || x[k] > x[best]) best = k;
      }
    if (argmax) (*argmax)[o] = best;
    y[o] = best >= 0 ? x[best] : 0.0f;  // best < 0 cannot happen: padding < kernel
  });
}

void max_pool_backward(int64_t out_count, const DeviceVector<int64_t>& argmax, const float* dy, float* dx) {
  for (int64_t o = 0; o < out_count; ++o)
    if (argmax[o] >= 0) dx[argmax[o]] += dy[o];
}

// ---------------------------------------------------------------------------------------------
// Average pooling: the sum of the taps inside the image, divided by kh * kw (padding counts
// as zeros) or, with exclude_padding, by the number of taps inside the image.

int avg_pool_divisor(const PoolSpec& s, const Window& wy, const Window& wx) {
  return s.exclude_padding ? (wy.hi - wy.lo) * (wx.hi - wx.lo) : s.kh * s.kw;
}

void avg_pool_forward(const PoolSpec& s, const Dims& in, const Dims& out, int batch, const float* x,
                      float* y) {
  for_each_pool_window(s, in, out, batch, [&](int n, int c, int64_t o, const Window& wy, const Window& wx) {
    double sum = 0;
    for (int ky = wy.lo; ky < wy.hi; ++ky)
      for (int kx = wx.lo; kx < wx.hi; ++kx) sum += double(x[at(in, n, c, wy.start + ky, wx.start + kx)]);
    const int divisor = avg_pool_divisor(s, wy, wx);
    y[o] = divisor > 0 ? float(sum / divisor) : 0.0f;
  });
}

void avg_pool_backward(const PoolSpec& s, const Dims& in, const Dims& out, int batch, const float* dy,
                       float* dx) {
  for_each_pool_window(s, in, out, batch, [&](int n, int c, int64_t o, const Window& wy, const Window& wx) {
    const int divisor = avg_pool_divisor(s, wy, wx);
    if (divisor <= 0) return;
    const double g = double(dy[o]) / divisor;
    for (int ky = wy.lo; ky < wy.hi; ++ky)
      for (int kx = wx.lo; kx < wx.hi; ++kx) dx[at(in, n, c, wy.start + ky, wx.start + kx)] += float(g);
  });
}

// ---------------------------------------------------------------------------------------------
// Concatenation along channels: input `part` (per-sample size part_numel) sits at per-sample
// offset `offset` of the output (per-sample size out_numel).

void concat_forward_part(int batch, int64_t out_numel, int64_t offset, int64_t part_numel, const float* x,
                         float* y) {
  for (int n = 0; n < batch; ++n)
    std::copy(x + n * part_numel, x + (n + 1) * part_numel, y + n * out_numel + offset);
}

void concat_backward_part(int batch, int64_t out_numel, int64_t offset, int64_t part_numel, const float* dy,
                          float* dx) {
  for (int n = 0; n < batch; ++n)
    for (int64_t i = 0; i < part_numel; ++i) dx[n * part_numel + i] += dy[n * out_numel + offset + i];
}

// ---------------------------------------------------------------------------------------------
// Fully connected: x flattened to [batch, in] (NCHW order), weights [out, in], bias [out].

void fc_forward(int batch, int64_t in, int out, const float* x, const float* w, const float* b, float* y) {
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < out; ++o) {
      double acc = b ? double(b[o]) : 0.0;
      for (int64_t i = 0; i < in; ++i) acc += double(w[o * in + i]) * double(x[n * in + i]);
      y[int64_t(n) * out + o] = float(acc);
    }
}

// dx accumulated; dw and db (when not null) overwritten.
void fc_backward(int batch, int64_t in, int out, const float* x, const float* w, const float* dy, float* dx,
                 float* dw, float* db) {
  for (int o = 0; o < out; ++o) {
    double bias_acc = 0;
    for (int n = 0; n < batch; ++n) bias_acc += double(dy[int64_t(n) * out + o]);
    if (db) db[o] = float(bias_acc);
    for (int64_t i = 0; i < in; ++i) {
      double acc = 0;
      for (int n = 0; n < batch; ++n) acc += double(dy[int64_t(n) * out + o]) * double(x[n * in + i]);
      dw[o * in + i] = float(acc);
    }
  }
  for (int n = 0; n < batch; ++n)
    for (int64_t i = 0; i < in; ++i) {
      double acc = 0;
      for (int o = 0; o < out; ++o) acc += double(dy[int64_t(n) * out + o]) * double(w[o * in + i]);
      dx[n * in + i] += float(acc);
    }
}

// ---------------------------------------------------------------------------------------------
// Dropout: in training, element e of sample s is kept iff dropout_keep(seed, step, node,
// sample_offset + s, e, rate), and kept values are scaled by 1 / (1 - rate). `keep` stores
// the mask for backward; it is empty after an inference forward (identity).

void dropout_forward(const ForwardArgs& args, int node, float rate, int batch, int64_t per_sample,
                     const float* x, float* y, DeviceVector<uint8_t>& keep) {
  if (!args.training) {
    keep.clear();
    std::copy(x, x + batch * per_sample, y);
    return;
  }
  const float scale = 1.0f / (1.0f - rate);
  keep.assign(size_t(batch) * size_t(per_sample), 0);
  for (int n = 0; n < batch; ++n)
    for (int64_t e = 0; e < per_sample; ++e) {
      const int64_t k = n * per_sample + e;
      const bool kept = dropout_keep(args.seed, args.step, node, args.sample_offset + n, e, rate);
      keep[k] = kept ? 1 : 0;
      y[k] = kept ? x[k] * scale : 0.0f;
    }
}

void dropout_backward(float rate, int64_t count, const DeviceVector<uint8_t>& keep, const float* dy, float* dx) {
  if (keep.empty()) {  // inference forward: identity
    for (int64_t i = 0; i < count; ++i) dx[i] += dy[i];
    return;
  }
  const float scale = 1.0f / (1.0f - rate);
  for (int64_t i = 0; i < count; ++i)
    if (keep[i]) dx[i] += dy[i] * scale;
}

// ---------------------------------------------------------------------------------------------
// The executor.

class ReferenceNetwork final : public Network {
 public:
  ReferenceNetwork(const Graph& g, int batch, bool inference_only)
      : g_(g), batch_(batch), inference_only_(inference_only) {
    check_network_args(g_, batch, "reference network");
    data_.resize(g_.nodes.size());
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const size_t count = size_t(batch_) * size_t(g_.nodes[i].out.numel());
      data_[i].y.assign(count, 0.0f);
      if (!inference_only_) data_[i].dy.assign(count, 0.0f);
    }
    input_.assign(data_[0].y.size(), 0.0f);
    out_grads_.resize(g_.outputs.size());
  }

  const Graph& graph() const override { return g_; }
  int batch() const override { return batch_; }
  std::string backend() const override { return "reference"; }
  std::string describe() const override {
    return "reference (naive loops, NCHW float32 buffers, double accumulation)";
  }
  bool inference_only() const override { return inference_only_; }

  void bind(float* params, float* grads, float* state) override {
    check_bind_args(g_, params, grads, state, "reference network", inference_only_);
    params_ = params;
    grads_ = grads;
    state_ = state;
    bound_ = true;
    forwarded_ = false;  // saved activations refer to the previous buffers
    backwarded_ = false;
  }

  void set_input(const float* x) override { std::copy(x, x + input_.size(), input_.begin()); }

  void forward(const ForwardArgs& args) override {
    if (!bound_) throw std::logic_error("reference network: forward() called before bind()");
    check_forward_mode(inference_only_, args, "reference network");
    forwarded_ = backwarded_ = false;
    std::copy(input_.begin(), input_.end(), data_[0].y.begin());
    for (int id = 1; id < int(g_.nodes.size()); ++id) {
      if (gate_) gate_->checkpoint();
      const auto begin = Clock::now();
      forward_node(id, args);
      const auto end = Clock::now();
      if (trace_) trace_(id, Phase::forward, begin, end);
    }
    forwarded_ = true;
  }

  void get_output(size_t i, float* y) override {
    if (i >= g_.outputs.size()) throw std::out_of_range("reference network: no output " + std::to_string(i));
    if (!forwarded_) throw std::logic_error("reference network: get_output() called before forward()");
    const DeviceVector<float>& src = data_[g_.outputs[i].node].y;
    std::copy(src.begin(), src.end(), y);
  }

  void set_output_grad(size_t i, const float* dy) override {
    check_training_call(inference_only_, "set_output_grad()", "reference network");
    if (i >= g_.outputs.size()) throw std::out_of_range("reference network: no output " + std::to_string(i));
    const size_t count = data_[g_.outputs[i].node].dy.size();
    out_grads_[i].assign(dy, dy + count);
  }

  void backward(const std::function<void(int node)>& on_param_grads) override {
    check_training_call(inference_only_, "backward()", "reference network");
    if (!bound_) throw std::logic_error("reference network: backward() called before bind()");
    if (!forwarded_) throw std::logic_error("reference network: backward() called before forward()");
    for (NodeData& d : data_) std::fill(d.dy.begin(), d.dy.end(), 0.0f);
    for (size_t i = 0; i < g_.outputs.size(); ++i) {
      DeviceVector<float>& dy = data_[g_.outputs[i].node].dy;
      for (size_t k = 0; k < out_grads_[i].size(); ++k) dy[k] += out_grads_[i][k];
      out_grads_[i].clear();  // outputs not set before the next backward get zero
    }
    for (int id = int(g_.nodes.size()) - 1; id >= 1; --id) {
      if (gate_) gate_->checkpoint();
      const auto begin = Clock::now();
      backward_node(id);
      const auto end = Clock::now();
      if (on_param_grads && !g_.nodes[id].params.empty()) on_param_grads(id);
      if (trace_) trace_(id, Phase::backward, begin, end);
    }
    backwarded_ = true;
  }

  void get_input_grad(float* dx) override {
    check_training_call(inference_only_, "get_input_grad()", "reference network");
    if (!backwarded_) throw std::logic_error("reference network: get_input_grad() called before backward()");
    std::copy(data_[0].dy.begin(), data_[0].dy.end(), dx);
  }

 private:
  struct NodeData {
    DeviceVector<float> y, dy;     // activation and its gradient (empty: inference only), batch x out dims, NCHW
    DeviceVector<uint8_t> keep;    // dropout mask
    DeviceVector<int64_t> argmax;  // max pooling winners
    BnSaved bn;                    // batch norm statistics used by the forward
  };

  // The k-th parameter tensor of a node (and its gradient range); nullptr when absent.
  const float* param(const Node& n, size_t k) const {
    return k < n.params.size() ? params_ + g_.params[n.params[k]].offset : nullptr;
  }
  float* grad(const Node& n, size_t k) const {
    return k < n.params.size() ? grads_ + g_.params[n.params[k]].offset : nullptr;
  }

  void forward_node(int id, const ForwardArgs& args) {
    const Node& n = g_.nodes[id];
    float* y = data_[id].y.data();
    const float* x = data_[n.inputs.at(0)].y.data();
    const Dims& in = g_.nodes[n.inputs.at(0)].out;
    const int64_t count = int64_t(data_[id].y.size());
    switch (n.kind) {
      case OpKind::input:
        break;
      case OpKind::conv:
        conv_forward(n.conv, in, n.out, batch_, x, param(n, 0), n.conv.bias ? param(n, 1) : nullptr, y);
        break;
      case OpKind::batch_norm:
        bn_forward(n.bn, n.out, batch_, args.training, x, param(n, 0), param(n, 1),
                   state_ + g_.state.at(n.state).offset, y, data_[id].bn);
        break;
      case OpKind::relu:
        clamp_forward(count, std::numeric_limits<float>::infinity(), x, y);
        break;
      case OpKind::relu6:
        clamp_forward(count, 6.0f, x, y);
        break;
      case OpKind::max_pool:
        max_pool_forward(n.pool, in, n.out, batch_, x, y, inference_only_ ? nullptr : &data_[id].argmax);
        break;
      case OpKind::avg_pool:
        avg_pool_forward(n.pool, in, n.out, batch_, x, y);
        break;
      case OpKind::concat:
        for_each_part(n, [&](int src, int64_t offset, int64_t part) {
          concat_forward_part(batch_, n.out.numel(), offset, part, data_[src].y.data(), y);
        });
        break;
      case OpKind::fc:
        fc_forward(batch_, in.numel(), n.out.c, x, param(n, 0), n.fc.bias ? param(n, 1) : nullptr, y);
        break;
      case OpKind::dropout:
        dropout_forward(args, id, n.dropout.rate, batch_, n.out.numel(), x, y, data_[id].keep);
        break;
    }
  }

  // Calls f(src, offset, part) for each input of concat node `n`: where its part of a sample
  // starts in the output, and how long it is.
  template <class F>
  void for_each_part(const Node& n, F f) const {
    int64_t offset = 0;
    for (int src : n.inputs) {
      const int64_t part = g_.nodes[src].out.numel();
      f(src, offset, part);
      offset += part;
    }
  }

  // Adds this node's input gradients into its inputs' dy (a node may feed several consumers)
  // and overwrites its parameter gradients.
  void backward_node(int id) {
    const Node& n = g_.nodes[id];
    const NodeData& d = data_[id];
    const float* dy = d.dy.data();
    const float* x = data_[n.inputs.at(0)].y.data();
    float* dx = data_[n.inputs.at(0)].dy.data();
    const Dims& in = g_.nodes[n.inputs.at(0)].out;
    const int64_t count = int64_t(d.dy.size());
    switch (n.kind) {
      case OpKind::input:
        break;
      case OpKind::conv:
        conv_backward(n.conv, in, n.out, batch_, x, param(n, 0), dy, dx, grad(n, 0),
                      n.conv.bias ? grad(n, 1) : nullptr);
        break;
      case OpKind::batch_norm:
        bn_backward(n.out, batch_, d.bn, x, param(n, 0), dy, dx, grad(n, 0), grad(n, 1));
        break;
      case OpKind::relu:
        clamp_backward(count, std::numeric_limits<float>::infinity(), x, dy, dx);
        break;
      case OpKind::relu6:
        clamp_backward(count, 6.0f, x, dy, dx);
        break;
      case OpKind::max_pool:
        max_pool_backward(count, d.argmax, dy, dx);
        break;
      case OpKind::avg_pool:
        avg_pool_backward(n.pool, in, n.out, batch_, dy, dx);
        break;
      case OpKind::concat:
        for_each_part(n, [&](int src, int64_t offset, int64_t part) {
          concat_backward_part(batch_, n.out.numel(), offset, part, dy, data_[src].dy.data());
        });
        break;
      case OpKind::fc:
        fc_backward(batch_, in.numel(), n.out.c, x, param(n, 0), dy, dx, grad(n, 0),
                    n.fc.bias ? grad(n, 1) : nullptr);
        break;
      case OpKind::dropout:
        dropout_backward(n.dropout.rate, count, d.keep, dy, dx);
        break;
    }
  }

  Graph g_;
  int batch_;
  bool inference_only_;  // no gradients, no max-pool indices (NetworkOptions)
  float* params_ = nullptr;
  float* grads_ = nullptr;
  float* state_ = nullptr;
  bool bound_ = false, forwarded_ = false, backwarded_ = false;
  DeviceVector<float> input_;
  std::vector<NodeData> data_;
  std::vector<std::vector<float>> out_grads_;  // empty: not set since the last backward
};

}  // namespace

std::unique_ptr<Network> make_reference_network(const Graph& g, int batch, bool inference_only) {
  return std::make_unique<ReferenceNetwork>(g, batch, inference_only);
}

}  // namespace ringbench::models
