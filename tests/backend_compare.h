// Comparing a backend against the reference backend (the numerical oracle), shared by the
// oneDNN and CUDA layer tests: random inputs, parameters and output gradients at small shapes,
// one training (and inference) step on both, and every output, the input gradient, every
// parameter gradient and the batch-norm state compared within a tolerance relative to each
// tensor's largest magnitude (the reference accumulates in double, the others in float). Also
// the small graphs both tests run.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "models/graph.h"
#include "models/network.h"

namespace ringbench::models::backend_test {

// Builds the network under test (a backend whose buffers are not host memory wraps itself
// into something that takes host buffers: see cuda_layers_test.cc).
using NetworkFactory = std::function<std::unique_ptr<Network>(const Graph& g, int batch)>;

inline NetworkFactory backend(const std::string& name) {
  return [name](const Graph& g, int batch) { return make_network(name, g, batch); };
}

inline std::vector<float> random_vector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// init_params, then biases, batch-norm gammas and betas and running statistics made random
// (their defaults 0 and 1 would hide mistakes).
inline void random_params(const Graph& g, uint32_t seed, std::vector<float>& params, std::vector<float>& state) {
  params.assign(g.param_count, 0.0f);
  state.assign(g.state_count, 0.0f);
  init_params(g, seed, params.data(), state.data());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (const ParamTensor& p : g.params) {
    float* v = params.data() + p.offset;
    if (p.kind == "bias" || p.kind == "bn_beta")
      for (size_t i = 0; i < p.numel; ++i) v[i] = u(rng);
    else if (p.kind == "bn_gamma")
      for (size_t i = 0; i < p.numel; ++i) v[i] = 1.0f + u(rng);
  }
  for (const StateTensor& s : g.state)
    for (size_t i = 0; i < s.channels; ++i) {
      state[s.offset + i] = u(rng);
      state[s.offset + s.channels + i] = 1.0f + u(rng);
    }
}

inline size_t out_count(const Graph& g, size_t i, int batch) {
  return size_t(batch) * size_t(g.output_node(i).out.numel());
}
inline size_t in_count(const Graph& g, int batch) { return size_t(batch) * size_t(g.input_dims().numel()); }

struct StepResult {
  std::vector<std::vector<float>> outputs;
  std::vector<float> dx, grads, state;
};

// One forward (+ backward) on the network `make` builds; `state` is the state before, the
// result's after.
// Output gradients that are empty vectors are left unset (zero).
inline StepResult run_step(const NetworkFactory& make, const Graph& g, int batch, const std::vector<float>& params,
                           const std::vector<float>& state, const std::vector<float>& x,
                           const std::vector<std::vector<float>>& dys, const ForwardArgs& args) {
  auto net = make(g, batch);
  StepResult r;
  std::vector<float> p = params;
  r.state = state;
  r.grads.assign(g.param_count, std::nanf(""));  // backward must overwrite every gradient
  net->bind(p.data(), r.grads.data(), r.state.data());
  net->set_input(x.data());
  net->forward(args);
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    r.outputs.emplace_back(out_count(g, i, batch));
    net->get_output(i, r.outputs.back().data());
  }
  for (size_t i = 0; i < dys.size(); ++i)
    if (!dys[i].empty()) net->set_output_grad(i, dys[i].data());
  net->backward();
  r.dx.resize(in_count(g, batch));
  net->get_input_grad(r.dx.data());
  return r;
}

inline StepResult run_step(const std::string& backend_name, const Graph& g, int batch, const std::vector<float>& params,
                           const std::vector<float>& state, const std::vector<float>& x,
                           const std::vector<std::vector<float>>& dys, const ForwardArgs& args) {
  return run_step(backend(backend_name), g, batch, params, state, x, dys, args);
}

// Elementwise: the largest |got - want| must be within tol x max|want| (floored at 1e-3, for
// tensors that are zero up to rounding). Normwise: ||got - want|| / ||want|| within tol, for
// deep graphs where a value rounding to the other side of a ReLU's 0 flips one gradient path.
inline ::testing::AssertionResult close(const float* got, const float* want, size_t n, double tol,
                                        const std::string& what, bool normwise = false) {
  double scale = 0, sum_sq = 0, err_sq = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    scale = std::max(scale, std::fabs(double(want[i])));
    const double err = std::isfinite(got[i]) ? std::fabs(double(got[i]) - double(want[i])) : INFINITY;
    sum_sq += double(want[i]) * double(want[i]);
    err_sq += err * err;
    if (!(err <= worst)) {
      worst = err;
      at = i;
    }
  }
  scale = std::max(scale, 1e-3);
  const double norm = std::sqrt(std::max(sum_sq, 1e-6));
  if (normwise ? std::sqrt(err_sq) <= tol * norm : worst <= tol * scale) return ::testing::AssertionSuccess();
  auto fail = ::testing::AssertionFailure();
  if (normwise) fail << what << ": relative error norm " << std::sqrt(err_sq) / norm << " > " << tol << "; worst ";
  else fail << what << ": ";
  return fail << "element " << at << " is " << got[at] << ", reference " << want[at] << " (error " << worst
              << ", tol " << tol << " x scale " << scale << ", " << n << " elements)";
}

// Outputs and state within `tol`, gradients within `grad_tol` (0: tol).
inline void expect_same_step(const Graph& g, const StepResult& got, const StepResult& want, double tol,
                             const std::string& label, bool normwise = false, double grad_tol = 0) {
  if (grad_tol == 0) grad_tol = tol;
  for (size_t i = 0; i < g.outputs.size(); ++i)
    EXPECT_TRUE(close(got.outputs[i].data(), want.outputs[i].data(), want.outputs[i].size(), tol,
                      label + " output " + std::to_string(i), normwise));
  EXPECT_TRUE(close(got.dx.data(), want.dx.data(), want.dx.size(), grad_tol, label + " input gradient", normwise));
  for (const ParamTensor& p : g.params)
    EXPECT_TRUE(close(got.grads.data() + p.offset, want.grads.data() + p.offset, p.numel, grad_tol,
                      label + " gradient of " + p.name, normwise));
  for (const StateTensor& s : g.state)
    EXPECT_TRUE(close(got.state.data() + s.offset, want.state.data() + s.offset, 2 * s.channels, tol,
                      label + " state " + s.name, normwise));
}

struct CheckOptions {
  int batch = 2;
  double tol = 1e-4;
  uint32_t seed = 7;
  bool inference_too = true;  // also an inference forward + backward
  bool normwise = false;      // see close()
  double grad_tol = 0;        // gradients (0: tol)
  float input_scale = 1;      // inputs uniform in [-input_scale, input_scale]
};

// A training step and (optionally) an inference step on the reference and on the backend `make`
// builds, compared.
inline void compare_with_reference(const NetworkFactory& make, const Graph& g, const CheckOptions& o = {}) {
  std::vector<float> params, state;
  random_params(g, o.seed, params, state);
  const std::vector<float> x = random_vector(in_count(g, o.batch), o.seed + 1, -o.input_scale, o.input_scale);
  std::vector<std::vector<float>> dys;
  for (size_t i = 0; i < g.outputs.size(); ++i) dys.push_back(random_vector(out_count(g, i, o.batch), o.seed + 2 + uint32_t(i)));

  ForwardArgs train{.training = true, .seed = 11, .step = 3, .sample_offset = 4};
  const StepResult want = run_step("reference", g, o.batch, params, state, x, dys, train);
  const StepResult got = run_step(make, g, o.batch, params, state, x, dys, train);
  expect_same_step(g, got, want, o.tol, "training", o.normwise, o.grad_tol);
  if (!o.inference_too) return;
  ForwardArgs infer{.training = false};
  const StepResult want_i = run_step("reference", g, o.batch, params, state, x, dys, infer);
  const StepResult got_i = run_step(make, g, o.batch, params, state, x, dys, infer);
  expect_same_step(g, got_i, want_i, o.tol, "inference", o.normwise, o.grad_tol);
}

inline ConvSpec conv(int out, int kh, int kw, int stride = 1, Pads pad = {}, int groups = 1, bool bias = false) {
  ConvSpec s;
  s.out_channels = out;
  s.kh = kh;
  s.kw = kw;
  s.stride_h = s.stride_w = stride;
  s.pad = pad;
  s.groups = groups;
  s.bias = bias;
  return s;
}

inline PoolSpec pool(int k, int stride, Pads pad = {}, bool exclude = false) {
  PoolSpec s;
  s.kh = s.kw = k;
  s.stride_h = s.stride_w = stride;
  s.pad = pad;
  s.exclude_padding = exclude;
  return s;
}

// input -> [a 3x3 conv to `channels`, so the op reads a conv output (oneDNN: its blocked layout)]
// -> op -> output.
// (Before a batch norm the conv has no bias: that bias's gradient is zero up to rounding.)
template <class Op>
Graph single_op(Dims in, int pre_conv_channels, Op op, bool pre_bias = true) {
  Graph g;
  int x = g.input(in);
  if (pre_conv_channels > 0) x = g.conv(x, "pre", conv(pre_conv_channels, 3, 3, 1, Pads::same(1), 1, pre_bias));
  g.add_output(op(g, x));
  return g;
}

// Branches with `channels` each (0: the input itself) concatenated, then a conv that reads it.
inline Graph concat_graph(const std::vector<int>& channels, bool conv_after) {
  Graph g;
  const int x = g.input({3, 6, 6});
  std::vector<int> parts;
  for (size_t k = 0; k < channels.size(); ++k)
    parts.push_back(channels[k] == 0 ? x
                                     : g.conv(x, "branch" + std::to_string(k), conv(channels[k], 3, 3, 1, Pads::same(1))));
  int y = g.concat(parts, "concat");
  if (conv_after) y = g.conv(y, "after", conv(16, 3, 3, 1, Pads::same(1), 1, true));
  g.add_output(y);
  return g;
}

inline Graph lenet_like() {
  Graph g;
  int x = g.input({1, 12, 12});
  x = g.conv(x, "conv0", conv(16, 5, 5, 1, Pads::same(2), 1, true));
  x = g.max_pool(g.relu(x, "conv0.relu"), "pool0", pool(2, 2));
  x = g.conv(x, "conv1", conv(32, 5, 5, 1, Pads::same(2), 1, true));
  x = g.max_pool(g.relu(x, "conv1.relu"), "pool1", pool(2, 2));
  x = g.relu(g.fc(x, "affine0", {64, true}), "affine0.relu");
  x = g.dropout(x, "dropout", 0.5f);
  g.add_output(g.fc(x, "affine1", {10, true}));
  return g;
}

// A stem and an Inception-style block: four branches from one node (1x1; 1x1 -> 1x7 -> 7x1;
// avg pool -> 1x1; max pool), concatenated, then global pooling and a classifier.
// With `aux`, a second output (an auxiliary classifier on the stem) is added.
inline Graph inception_like(bool aux) {
  Graph g;
  auto cbr = [&](int in, const std::string& name, const ConvSpec& s) {
    const int c = g.conv(in, name, s);
    return g.relu(g.batch_norm(c, name + ".bn"), name + ".relu");
  };
  int x = g.input({3, 19, 19});
  x = cbr(x, "stem", conv(32, 3, 3, 2));
  const int b1 = cbr(x, "b1x1", conv(16, 1, 1));
  int b2 = cbr(x, "b7.1", conv(16, 1, 1));
  b2 = cbr(b2, "b7.2", conv(16, 1, 7, 1, {0, 0, 3, 3}));
  b2 = cbr(b2, "b7.3", conv(32, 7, 1, 1, {3, 3, 0, 0}));
  int b3 = g.avg_pool(x, "bpool.pool", pool(3, 1, Pads::same(1)));
  b3 = cbr(b3, "bpool.conv", conv(16, 1, 1));
  const int b4 = g.max_pool(x, "bmax", pool(3, 1, Pads::same(1)));
  const int cat = g.concat({b1, b2, b3, b4}, "mixed");
  int y = g.avg_pool(cat, "gap", pool(9, 1));
  g.add_output(g.fc(g.dropout(y, "drop", 0.2f), "logits", {10, true}));
  if (aux) {
    int a = g.avg_pool(x, "aux.pool", pool(3, 3));
    a = cbr(a, "aux.conv", conv(16, 1, 1));
    g.add_output(g.fc(a, "aux.logits", {10, true}), 0.4f);
  }
  return g;
}

}  // namespace ringbench::models::backend_test
