// Comparing a backend against the reference backend (the numerical oracle), shared by the
// oneDNN and CUDA layer tests: random inputs, parameters and output gradients at small shapes,
// one training (and inference) step on both, and every output, the input gradient, every
// parameter gradient and the batch-norm state compared within a tolerance relative to each
// tensor's largest magnitude (the reference accumulates in double, the others in float). Also
// the small graphs and the cases both tests run, each test file calling them from its own TEST
// (ctest's gtest_add_tests registers the tests it finds in the test's .cc file).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
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
                                        const std::string& what, bool normwise = false, double min_scale = 1e-3) {
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
  scale = std::max(scale, min_scale);
  const double norm = std::sqrt(std::max(sum_sq, 1e-6));
  if (normwise ? std::sqrt(err_sq) <= tol * norm : worst <= tol * scale) return ::testing::AssertionSuccess();
  auto fail = ::testing::AssertionFailure();
  if (normwise) fail << what << ": relative error norm " << std::sqrt(err_sq) / norm << " > " << tol << "; worst ";
  else fail << what << ": ";
  return fail << "element " << at << " is " << got[at] << ", reference " << want[at] << " (error " << worst
              << ", tol " << tol << " x scale " << scale << ", " << n << " elements)";
}

// Outputs and state within `tol`, gradients within `grad_tol` (0: tol) of a scale of at least
// `grad_min_scale`.
inline void expect_same_step(const Graph& g, const StepResult& got, const StepResult& want, double tol,
                             const std::string& label, bool normwise = false, double grad_tol = 0,
                             double grad_min_scale = 1e-3) {
  if (grad_tol == 0) grad_tol = tol;
  for (size_t i = 0; i < g.outputs.size(); ++i)
    EXPECT_TRUE(close(got.outputs[i].data(), want.outputs[i].data(), want.outputs[i].size(), tol,
                      label + " output " + std::to_string(i), normwise));
  EXPECT_TRUE(close(got.dx.data(), want.dx.data(), want.dx.size(), grad_tol, label + " input gradient", normwise,
                    grad_min_scale));
  for (const ParamTensor& p : g.params)
    EXPECT_TRUE(close(got.grads.data() + p.offset, want.grads.data() + p.offset, p.numel, grad_tol,
                      label + " gradient of " + p.name, normwise, grad_min_scale));
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
  double grad_min_scale = 1e-3;  // gradients: the smallest scale their errors are measured against
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
  expect_same_step(g, got, want, o.tol, "training", o.normwise, o.grad_tol, o.grad_min_scale);
  if (!o.inference_too) return;
  ForwardArgs infer{.training = false};
  const StepResult want_i = run_step("reference", g, o.batch, params, state, x, dys, infer);
  const StepResult got_i = run_step(make, g, o.batch, params, state, x, dys, infer);
  expect_same_step(g, got_i, want_i, o.tol, "inference", o.normwise, o.grad_tol, o.grad_min_scale);
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

// ---------------------------------------------------------------------------------------------
// The cases both backends run; `make` builds the network under test.

// A conv on the input or after another conv (`pre` channels: see single_op).
struct ConvCase {
  std::string name;
  Dims in;
  int pre;  // channels of a conv before (0: on the input itself)
  ConvSpec spec;
};

// The convolutions both backends are checked on; each test adds its own.
inline std::vector<ConvCase> conv_cases(std::initializer_list<ConvCase> more) {
  std::vector<ConvCase> cases{
      ConvCase{"plain3x3_on_input", {3, 9, 9}, 0, conv(8, 3, 3, 1, Pads::same(1))},
      ConvCase{"bias_on_input", {3, 9, 9}, 0, conv(16, 3, 3, 1, Pads::same(1), 1, true)},
      ConvCase{"pointwise", {3, 7, 7}, 32, conv(16, 1, 1)},
      ConvCase{"grouped", {3, 8, 8}, 32, conv(32, 3, 3, 1, Pads::same(1), 4)},
      ConvCase{"grouped_odd", {6, 7, 7}, 0, conv(9, 3, 3, 1, Pads::same(1), 3)},
      ConvCase{"depthwise", {3, 9, 9}, 32, conv(32, 3, 3, 1, Pads::same(1), 32)},
      ConvCase{"depthwise_stride2", {3, 9, 9}, 16, conv(16, 3, 3, 2, Pads::same(1), 16)},
      ConvCase{"depthwise_on_input", {5, 9, 9}, 0, conv(5, 3, 3, 1, Pads::same(1), 5)},
      ConvCase{"stride2_valid", {3, 11, 11}, 16, conv(32, 3, 3, 2)},
      ConvCase{"stride2_on_input", {3, 11, 11}, 0, conv(32, 3, 3, 2)},
      ConvCase{"k1x7", {3, 9, 9}, 16, conv(16, 1, 7, 1, {0, 0, 3, 3})},
      ConvCase{"k7x1", {3, 9, 9}, 16, conv(16, 7, 1, 1, {3, 3, 0, 0})},
      ConvCase{"asymmetric_pads", {3, 10, 9}, 16, conv(16, 3, 3, 2, {0, 2, 1, 0}, 1, true)},
      ConvCase{"asymmetric_pads_5x5", {4, 8, 8}, 0, conv(8, 5, 5, 1, {1, 3, 4, 0})},
      ConvCase{"odd_channels", {3, 6, 6}, 5, conv(7, 3, 3, 1, Pads::same(1), 1, true)},
      ConvCase{"kernel_eq_input", {3, 5, 5}, 16, conv(16, 5, 5)}};
  cases.insert(cases.end(), more);
  return cases;
}

inline void check_conv(const NetworkFactory& make, const ConvCase& c, double tol = 1e-4) {
  compare_with_reference(make, single_op(c.in, c.pre, [&](Graph& g, int x) { return g.conv(x, "conv", c.spec); }),
                         {.tol = tol});
}

// Max or average pooling on a 3x9x9 input, after a conv to `pre` channels (0: none).
struct PoolCase {
  std::string name;
  bool max;
  int pre;
  PoolSpec spec;
};

inline std::vector<PoolCase> pool_cases(std::initializer_list<PoolCase> more) {
  std::vector<PoolCase> cases{PoolCase{"max2x2", true, 16, pool(2, 2)},
                              PoolCase{"max3x3s2", true, 32, pool(3, 2)},
                              PoolCase{"max3x3s1_pad", true, 16, pool(3, 1, Pads::same(1))},
                              PoolCase{"max_asym_pad", true, 16, pool(3, 2, {0, 1, 1, 2})},
                              PoolCase{"max_on_input", true, 0, pool(3, 2, Pads::same(1))},
                              PoolCase{"avg_include", false, 16, pool(3, 1, Pads::same(1))},
                              PoolCase{"avg_exclude", false, 16, pool(3, 1, Pads::same(1), true)},
                              PoolCase{"avg_include_s2_asym", false, 16, pool(3, 2, {1, 0, 2, 1})},
                              PoolCase{"avg_exclude_s2_asym", false, 16, pool(3, 2, {1, 0, 2, 1}, true)},
                              PoolCase{"avg_global", false, 32, pool(9, 1)},
                              PoolCase{"avg_exclude_on_input", false, 0, pool(3, 1, Pads::same(1), true)},
                              PoolCase{"avg_odd_channels", false, 5, pool(2, 2, {1, 0, 1, 0}, true)}};
  cases.insert(cases.end(), more);
  return cases;
}

inline void check_pool(const NetworkFactory& make, const PoolCase& c) {
  compare_with_reference(make, single_op({3, 9, 9}, c.pre, [&](Graph& g, int x) {
    return c.max ? g.max_pool(x, "pool", c.spec) : g.avg_pool(x, "pool", c.spec);
  }));
}

// Batch norm on the input, after a conv, after a conv to an odd channel count: training (with the
// running statistics) and inference.
inline void check_batch_norm_training(const NetworkFactory& make) {
  for (int pre : {0, 16, 5}) {
    SCOPED_TRACE("pre-conv channels " + std::to_string(pre));
    compare_with_reference(
        make, single_op({3, 6, 5}, pre, [](Graph& g, int x) { return g.batch_norm(x, "bn", {1e-3f, 0.1f}); }, false),
        {.batch = 3, .tol = 2e-4});
  }
}

inline void check_batch_norm_momentum_and_eps(const NetworkFactory& make) {
  compare_with_reference(
      make, single_op({3, 4, 4}, 32, [](Graph& g, int x) { return g.batch_norm(x, "bn", {1e-5f, 0.9f}); }, false),
      {.batch = 2, .tol = 2e-4});
}

// Per-channel statistics over the batch only (h = w = 1), `features` channels. At batch 1 the
// normalised value x - mean is 0, so the training gradients are exactly 0 in the reference; a GPU
// whose mean of one value rounds gets ~1e-6 there (that rounding amplified by 1/sqrt(eps)).
// Those are measured against the output gradient's scale (1), where a wrong formula gives O(1).
inline void check_batch_norm_after_fc(const NetworkFactory& make, int features, int batch) {
  compare_with_reference(make, single_op({3, 4, 4}, 0, [&](Graph& g, int x) {
    return g.batch_norm(g.fc(x, "fc", {features, false}), "bn");
  }), {.batch = batch, .tol = 2e-4, .grad_min_scale = batch == 1 ? 1.0 : 1e-3});
}

inline void check_relu(const NetworkFactory& make) {
  for (int pre : {0, 16})
    compare_with_reference(make, single_op({3, 5, 5}, pre, [](Graph& g, int x) { return g.relu(x, "relu"); }));
}

// Inputs in [-8, 8] so that both ends of the clip are hit, directly and after a conv.
inline void check_relu6(const NetworkFactory& make) {
  for (int pre : {0, 16})
    compare_with_reference(make, single_op({3, 5, 5}, pre, [](Graph& g, int x) { return g.relu6(x, "relu6"); }),
                           {.seed = 3, .input_scale = 8});
}

// `a` twice in one concat, and the input `x` in it and before `a`.
inline void check_concat_same_input_twice(const NetworkFactory& make) {
  Graph g;
  const int x = g.input({3, 5, 5});
  const int a = g.conv(x, "a", conv(16, 3, 3, 1, Pads::same(1)));
  g.add_output(g.relu(g.concat({a, a, x}, "concat"), "relu"));
  compare_with_reference(make, g);
}

inline void check_fc_after_conv(const NetworkFactory& make) {
  compare_with_reference(make, single_op({3, 5, 4}, 16, [](Graph& g, int x) { return g.fc(x, "fc", {10, true}); }));
  compare_with_reference(make, single_op({3, 5, 4}, 5, [](Graph& g, int x) { return g.fc(x, "fc", {7, false}); }));
}

inline void check_fc_from_input_and_chained(const NetworkFactory& make, int batch) {
  compare_with_reference(make, single_op({3, 5, 4}, 0, [](Graph& g, int x) {
    return g.fc(g.relu(g.fc(x, "fc0", {33, true}), "relu"), "fc1", {10, true});
  }), {.batch = batch});
}

// Dropout's masks equal the reference's bit for bit, step by step; inference is the identity.
inline void check_dropout_masks(const NetworkFactory& make) {
  const Graph g = single_op({2, 6, 5}, 0, [](Graph& gr, int x) { return gr.dropout(x, "drop", 0.4f); });
  const int batch = 3;
  std::vector<float> params, state;
  random_params(g, 1, params, state);
  const std::vector<float> x = random_vector(in_count(g, batch), 5, 0.5f, 1.5f);  // never 0
  const std::vector<std::vector<float>> dys{random_vector(out_count(g, 0, batch), 6)};
  for (uint64_t step : {0, 1, 7}) {
    const ForwardArgs args{.training = true, .seed = 42, .step = step, .sample_offset = int64_t(step) * batch};
    const StepResult want = run_step("reference", g, batch, params, state, x, dys, args);
    const StepResult got = run_step(make, g, batch, params, state, x, dys, args);
    EXPECT_EQ(got.outputs[0], want.outputs[0]) << "step " << step;
    EXPECT_EQ(got.dx, want.dx) << "step " << step;
    const auto dropped = std::count(got.outputs[0].begin(), got.outputs[0].end(), 0.0f);
    EXPECT_GT(dropped, 0);
    EXPECT_LT(dropped, int64_t(got.outputs[0].size()));
  }
  // Inference: identity.
  const StepResult inf = run_step(make, g, batch, params, state, x, dys, {.training = false});
  EXPECT_EQ(inf.outputs[0], x);
  EXPECT_EQ(inf.dx, dys[0]);
}

inline void check_dropout_after_conv_before_fc(const NetworkFactory& make) {
  compare_with_reference(
      make, single_op({3, 4, 4}, 16, [](Graph& g, int x) { return g.fc(g.dropout(x, "drop", 0.5f), "fc", {6, true}); }));
}

// inception_like(true) compared, then with only one output's gradient set: the other counts as zero.
inline void check_two_outputs(const NetworkFactory& make) {
  const Graph g = inception_like(true);
  compare_with_reference(make, g, {.batch = 2, .tol = 3e-4});
  std::vector<float> params, state;
  random_params(g, 9, params, state);
  const std::vector<float> x = random_vector(in_count(g, 2), 10);
  for (size_t only : {0, 1}) {
    std::vector<std::vector<float>> dys(2);
    dys[only] = random_vector(out_count(g, only, 2), 11);
    const ForwardArgs args{.training = true, .seed = 1};
    const StepResult want = run_step("reference", g, 2, params, state, x, dys, args);
    const StepResult got = run_step(make, g, 2, params, state, x, dys, args);
    expect_same_step(g, got, want, 3e-4, "only output " + std::to_string(only));
  }
}

// A node feeding consumers of every kind, whose gradients must be summed (oneDNN: across
// layouts); the input feeds two, and the node is also an output's producer.
inline void check_fan_out(const NetworkFactory& make) {
  Graph g;
  const int x = g.input({3, 7, 7});
  const int a = g.conv(x, "a", conv(16, 3, 3, 1, Pads::same(1), 1, true));
  const int r = g.relu(a, "r");
  const int p = g.max_pool(a, "p", pool(3, 1, Pads::same(1)));
  const int c = g.conv(a, "c", conv(5, 3, 3, 1, Pads::same(1)));
  const int d = g.conv(x, "d", conv(3, 1, 1));
  const int cat = g.concat({r, p, c, d}, "cat");
  g.add_output(g.fc(g.dropout(cat, "drop", 0.3f), "fc", {4, true}));
  g.add_output(g.relu(a, "side"), 0.5f);
  compare_with_reference(make, g, {.batch = 2});
}

// A batch norm reads the input: no deferral of the input gradient.
inline void check_batch_norm_on_input(const NetworkFactory& make) {
  Graph g;
  const int x = g.input({3, 5, 5});
  const int bn = g.batch_norm(x, "bn");
  const int c = g.conv(x, "c", conv(3, 3, 3, 1, Pads::same(1)));
  g.add_output(g.concat({bn, c}, "cat"));
  compare_with_reference(make, g, {.batch = 3, .tol = 2e-4});
}

// Two steps on one network: running statistics accumulate, gradients are overwritten, and a
// rebind to other buffers takes effect.
inline void check_second_step_and_rebind(const NetworkFactory& make) {
  const Graph g = inception_like(false);
  const int batch = 2;
  std::vector<float> params, state;
  random_params(g, 4, params, state);
  std::vector<std::unique_ptr<Network>> nets;
  std::vector<std::vector<float>> p(2, params), s(2, state), gr(2, std::vector<float>(g.param_count));
  nets.push_back(make_network("reference", g, batch));
  nets.push_back(make(g, batch));
  for (int step = 0; step < 2; ++step) {
    const std::vector<float> x = random_vector(in_count(g, batch), 20 + uint32_t(step));
    const std::vector<float> dy = random_vector(out_count(g, 0, batch), 30 + uint32_t(step));
    for (size_t k = 0; k < 2; ++k) {
      if (step == 1)  // a fresh parameter copy, slightly changed, bound anew
        for (float& v : p[k]) v *= 0.9f;
      nets[k]->bind(p[k].data(), gr[k].data(), s[k].data());
      nets[k]->set_input(x.data());
      nets[k]->forward({.training = true, .step = uint64_t(step)});
      nets[k]->set_output_grad(0, dy.data());
      nets[k]->backward();
    }
    for (const ParamTensor& t : g.params)
      EXPECT_TRUE(close(gr[1].data() + t.offset, gr[0].data() + t.offset, t.numel, 3e-4, t.name));
    EXPECT_TRUE(close(s[1].data(), s[0].data(), s[0].size(), 1e-4, "state"));
  }
}

// 1 input channel, 2x2 image, conv 3x3 pad 1 with all-one weights and bias 0.5: each output is
// the sum of the input's taps in the window plus 0.5.
inline void check_conv_by_hand(const NetworkFactory& make) {
  Graph g;
  const int x = g.input({1, 2, 2});
  g.add_output(g.conv(x, "c", conv(1, 3, 3, 1, Pads::same(1), 1, true)));
  std::vector<float> params(g.param_count, 1.0f), grads(g.param_count);
  params[9] = 0.5f;
  auto net = make(g, 1);
  net->bind(params.data(), grads.data(), nullptr);
  const float in[4] = {1, 2, 3, 4};
  net->set_input(in);
  net->forward({});
  float out[4];
  net->get_output(0, out);
  for (float v : out) EXPECT_FLOAT_EQ(v, 10.5f);
  const float dy[4] = {1, 0, 0, 0};
  net->set_output_grad(0, dy);
  net->backward();
  float dx[4];
  net->get_input_grad(dx);
  for (float v : dx) EXPECT_FLOAT_EQ(v, 1.0f);  // every input is in output 0's window
  EXPECT_FLOAT_EQ(grads[9], 1.0f);               // bias
  EXPECT_FLOAT_EQ(grads[4], 1.0f);               // centre tap sees x[0]
  EXPECT_FLOAT_EQ(grads[8], 4.0f);               // bottom-right tap sees x[3]
  EXPECT_FLOAT_EQ(grads[0], 0.0f);               // top-left tap sees padding
}

// The tests below drive a network bound to the backend's own buffers (host or device memory):
// `read_grads(offset, n)` returns n gradients from `offset` of the bound gradient buffer as they
// are once the work queued so far is done.
using GradReader = std::function<std::vector<float>(size_t offset, size_t n)>;

// backward()'s callback comes for every node with parameters, in reverse order, once the node's
// gradients are final (what is queued by then is what they end as), and the trace sees every
// node's backward. `net` is bound; its graph has every output.
inline void check_param_grads_callback(Network& net, int batch, const GradReader& read_grads) {
  const Graph& g = net.graph();
  const std::vector<float> x = random_vector(in_count(g, batch), 3);
  net.set_input(x.data());
  net.forward({});
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const std::vector<float> dy = random_vector(out_count(g, i, batch), 4 + uint32_t(i));
    net.set_output_grad(i, dy.data());
  }
  std::vector<int> order, traced;
  std::vector<std::vector<float>> snapshot;
  net.set_trace([&](int node, Phase phase, auto begin, auto end) {
    EXPECT_LE(begin, end);
    if (phase == Phase::backward) traced.push_back(node);
  });
  net.backward([&](int node) {
    order.push_back(node);
    for (int k : g.nodes[node].params) {
      const ParamTensor& t = g.params[k];
      snapshot.push_back(read_grads(t.offset, t.numel));
    }
  });
  std::vector<int> expected;
  for (int i = int(g.nodes.size()) - 1; i >= 1; --i)
    if (!g.nodes[i].params.empty()) expected.push_back(i);
  EXPECT_EQ(order, expected);
  const std::vector<float> grads = read_grads(0, g.param_count);
  size_t k = 0;
  for (int node : order)
    for (int pi : g.nodes[node].params) {
      const ParamTensor& t = g.params[pi];
      EXPECT_TRUE(std::equal(snapshot[k].begin(), snapshot[k].end(), grads.begin() + long(t.offset))) << t.name;
      ++k;
    }
  EXPECT_EQ(traced.size(), g.nodes.size() - 1);
  EXPECT_TRUE(std::is_sorted(traced.rbegin(), traced.rend()));
}

// The output gradients set before one backward do not carry over to the next: without any,
// every parameter gradient is zero. `net` is bound.
inline void check_output_grads_reset(Network& net, int batch, const GradReader& read_grads) {
  const Graph& g = net.graph();
  const std::vector<float> x = random_vector(in_count(g, batch), 3);
  const std::vector<float> dy = random_vector(out_count(g, 0, batch), 4);
  net.set_input(x.data());
  net.forward({});
  net.set_output_grad(0, dy.data());
  net.backward();
  std::vector<float> grads = read_grads(0, g.param_count);
  EXPECT_TRUE(std::any_of(grads.begin(), grads.end(), [](float v) { return v != 0; }));
  net.forward({});
  net.backward();  // no gradient set: all zero
  grads = read_grads(0, g.param_count);
  EXPECT_TRUE(std::all_of(grads.begin(), grads.end(), [](float v) { return v == 0; }));
}

}  // namespace ringbench::models::backend_test
