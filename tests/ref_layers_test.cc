// The reference backend is the oracle the other backends are compared against, so it is
// checked here on its own: forward values against small hand-computed examples, and every
// gradient against central finite differences of the scalar loss
//   L = sum_i sum(y_i * r_i)      (r_i fixed random, so dL/dy_i = r_i)
// on tiny shapes, for every op and variant, and for branching and two-output graphs.
//
// Tolerances: the network computes in float32 (sums in double), the loss is summed in double,
// and the central difference uses h = 1e-2. A derivative passes when
//   |analytic - numeric| <= 1e-4 + 1e-3 * max(|analytic|, |numeric|).
// That is tighter than the usual float bounds (1e-3 + 1e-2 * ...), which would let a 1% error
// in a linear op through. Measured: every check here still passes at 3e-5 + 3e-4 * ...; the
// largest differences come from batch norm's curvature (O(h^2) truncation, ~2e-5).
// Inputs are chosen so no ReLU or max-pool kink lies within h of an input element (values
// bounded away from 0 and 6, max-pool inputs distinct by 0.05 > 2h); ops after a conv that
// could straddle a kink are not used in the composite graphs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/backends.h"
#include "models/graph.h"
#include "models/network.h"

namespace ringbench::models {
namespace {

// ---------------------------------------------------------------------------------------------
// Test data

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen_); }
  std::vector<float> uniform_vec(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (float& e : v) e = uniform(lo, hi);
    return v;
  }
  // Magnitudes in [0.1, 1], random signs: at least 0.1 from ReLU's kink.
  std::vector<float> away_from_zero(size_t n) {
    std::vector<float> v(n);
    for (float& e : v) e = (uniform(0, 1) < 0.5f ? -1.0f : 1.0f) * uniform(0.1f, 1.0f);
    return v;
  }
  // Distinct values 0.05 apart in random order: no max-pool tie within a perturbation.
  std::vector<float> distinct(size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = (float(i) - float(n) / 2) * 0.05f;
    std::shuffle(v.begin(), v.end(), gen_);
    return v;
  }

 private:
  std::mt19937_64 gen_;
};

// A graph at a batch size with its buffers; the loss weights r are one vector per output.
struct Problem {
  Graph g;
  int batch = 2;
  std::vector<float> x, params, grads, state;
  std::vector<std::vector<float>> r;

  size_t count(int node) const { return size_t(batch) * size_t(g.nodes.at(node).out.numel()); }
};

// Parameters from init_params, then batch-norm gamma/beta, biases and running statistics
// randomised so every gradient and the inference path are exercised; x and r in [-1, 1].
Problem make_problem(Graph g, int batch, uint64_t seed = 1) {
  Problem p;
  p.g = std::move(g);
  p.batch = batch;
  p.params.assign(p.g.param_count, 0.0f);
  p.grads.assign(p.g.param_count, 0.0f);
  p.state.assign(p.g.state_count, 0.0f);
  init_params(p.g, seed, p.params.data(), p.state.data());
  Rng rng(seed * 7919 + 17);
  for (const ParamTensor& t : p.g.params) {
    float* v = p.params.data() + t.offset;
    for (size_t i = 0; i < t.numel; ++i) {
      if (t.kind == "bn_gamma") v[i] = rng.uniform(0.5f, 1.5f);
      if (t.kind == "bn_beta" || t.kind == "bias") v[i] = rng.uniform(-0.5f, 0.5f);
    }
  }
  for (const StateTensor& s : p.g.state)
    for (size_t c = 0; c < s.channels; ++c) {
      p.state[s.offset + c] = rng.uniform(-0.5f, 0.5f);
      p.state[s.offset + s.channels + c] = rng.uniform(0.5f, 2.0f);
    }
  p.x = rng.uniform_vec(p.count(0), -1, 1);
  for (const Output& o : p.g.outputs) p.r.push_back(rng.uniform_vec(p.count(o.node), -1, 1));
  return p;
}

// A graph of one op on an input of shape `in`, its output the graph's output.
Graph single_op(Dims in, const std::function<int(Graph&, int)>& op) {
  Graph g;
  const int x = g.input(in);
  g.add_output(op(g, x));
  return g;
}

std::unique_ptr<Network> bound_network(Problem& p) {
  auto net = make_reference_network(p.g, p.batch);
  net->bind(p.params.data(), p.grads.data(), p.state.data());
  return net;
}

std::vector<float> forward_output(Network& net, const Problem& p, const ForwardArgs& args, size_t i = 0) {
  net.set_input(p.x.data());
  net.forward(args);
  std::vector<float> y(p.count(p.g.outputs.at(i).node));
  net.get_output(i, y.data());
  return y;
}

double loss(Network& net, const Problem& p, const ForwardArgs& args) {
  net.set_input(p.x.data());
  net.forward(args);
  double total = 0;
  for (size_t i = 0; i < p.g.outputs.size(); ++i) {
    std::vector<float> y(p.r[i].size());
    net.get_output(i, y.data());
    for (size_t k = 0; k < y.size(); ++k) total += double(y[k]) * double(p.r[i][k]);
  }
  return total;
}

struct Grads {
  std::vector<float> dx, dparams;
};

Grads analytic_grads(Network& net, Problem& p, const ForwardArgs& args) {
  net.set_input(p.x.data());
  net.forward(args);
  for (size_t i = 0; i < p.r.size(); ++i) net.set_output_grad(i, p.r[i].data());
  net.backward();
  Grads g;
  g.dx.resize(p.x.size());
  net.get_input_grad(g.dx.data());
  g.dparams = p.grads;
  return g;
}

// ---------------------------------------------------------------------------------------------
// The finite-difference check

struct Tolerance {
  double h = 1e-2;     // central-difference step
  double rel = 1e-3;   // see the top of the file
  double abs = 1e-4;
};

class Mismatches {
 public:
  void check(const std::string& what, double analytic, double numeric, const Tolerance& tol) {
    ++checked_;
    max_abs_ = std::max(max_abs_, std::abs(analytic));
    const double bound = tol.abs + tol.rel * std::max(std::abs(analytic), std::abs(numeric));
    if (std::abs(analytic - numeric) <= bound) return;
    if (++failed_ <= 8)
      ADD_FAILURE() << what << ": analytic " << analytic << " vs central difference " << numeric;
  }
  ~Mismatches() {
    EXPECT_EQ(failed_, 0) << "of " << checked_ << " derivatives";
    EXPECT_GT(max_abs_, 1e-3) << "all gradients are ~0: the check would be vacuous";
  }

 private:
  int checked_ = 0, failed_ = 0;
  double max_abs_ = 0;
};

// dL/dx and dL/dparams against central differences, for every element.
void expect_gradients(Problem& p, const ForwardArgs& args = {}, const Tolerance& tol = {}) {
  auto net = bound_network(p);
  const Grads a = analytic_grads(*net, p, args);
  Mismatches m;
  auto central = [&](float& v) {
    const float saved = v;
    v = saved + float(tol.h);
    const double up = loss(*net, p, args);
    v = saved - float(tol.h);
    const double down = loss(*net, p, args);
    v = saved;
    return (up - down) / (2 * tol.h);
  };
  for (size_t i = 0; i < p.x.size(); ++i) m.check("dx[" + std::to_string(i) + "]", a.dx[i], central(p.x[i]), tol);
  for (const ParamTensor& t : p.g.params)
    for (size_t i = 0; i < t.numel; ++i)
      m.check(t.name + "[" + std::to_string(i) + "]", a.dparams[t.offset + i], central(p.params[t.offset + i]), tol);
}

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// ---------------------------------------------------------------------------------------------
// Convolution

TEST(RefConv, Forward3x3HandComputed) {
  ConvSpec s;
  s.out_channels = 1;
  s.kh = s.kw = 3;
  s.pad = Pads::same(1);
  s.bias = true;
  Problem p = make_problem(single_op({1, 3, 3}, [&](Graph& g, int x) { return g.conv(x, "conv", s); }), 1);
  p.x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  // A "plus" kernel: each output is its pixel plus its four neighbours inside the image.
  const std::vector<float> w = {0, 1, 0, 1, 1, 1, 0, 1, 0};
  std::copy(w.begin(), w.end(), p.params.begin() + long(p.g.params[0].offset));
  p.params[p.g.params[1].offset] = 0.5f;
  auto net = bound_network(p);
  expect_near_all(forward_output(*net, p, {}), {7.5, 11.5, 11.5, 17.5, 25.5, 23.5, 19.5, 29.5, 23.5});
}

TEST(RefConv, ForwardStrideAndAsymmetricPadHandComputed) {
  ConvSpec s;
  s.out_channels = 1;
  s.kh = 1;
  s.kw = 2;
  s.stride_w = 2;
  s.pad = {0, 0, 1, 0};  // one zero on the left only
  Problem p = make_problem(single_op({1, 1, 5}, [&](Graph& g, int x) { return g.conv(x, "conv", s); }), 1);
  ASSERT_EQ(p.g.nodes[1].out, (Dims{1, 1, 3}));
  p.x = {1, 2, 3, 4, 5};
  p.params = {1, 10};
  auto net = bound_network(p);
  // Windows over [0 | 1 2 3 4 5]: (0, 1), (2, 3), (4, 5).
  expect_near_all(forward_output(*net, p, {}), {10, 32, 54});
}

TEST(RefConv, ForwardGroupChannelMapping) {
  {  // 2 groups, 4 -> 2 channels: output g reads input channels 2g and 2g+1.
    ConvSpec s;
    s.out_channels = 2;
    s.groups = 2;
    Problem p = make_problem(single_op({4, 1, 1}, [&](Graph& g, int x) { return g.conv(x, "conv", s); }), 1);
    p.x = {1, 2, 3, 4};
    p.params = {1, 10, 100, 1000};
    auto net = bound_network(p);
    expect_near_all(forward_output(*net, p, {}), {21, 4300});
  }
  {  // Depthwise with multiplier 2: outputs 2c and 2c+1 read input channel c.
    ConvSpec s;
    s.out_channels = 4;
    s.groups = 2;
    Problem p = make_problem(single_op({2, 1, 1}, [&](Graph& g, int x) { return g.conv(x, "conv", s); }), 1);
    p.x = {10, 20};
    p.params = {1, 2, 3, 4};
    auto net = bound_network(p);
    expect_near_all(forward_output(*net, p, {}), {10, 20, 60, 80});
  }
}

struct ConvCase {
  const char* name;
  Dims in;
  int batch;
  ConvSpec spec;
};

// Every field, in ConvSpec's (and PoolSpec's, below) order.
ConvSpec conv_spec(int out, int kh, int kw, int stride_h, int stride_w, Pads pad, int groups, bool bias) {
  return {out, kh, kw, stride_h, stride_w, pad, groups, bias};
}

TEST(RefConv, GradientsMatchFiniteDifferences) {
  const std::vector<ConvCase> cases = {
      {"3x3 pad 1, bias", {3, 5, 5}, 2, conv_spec(4, 3, 3, 1, 1, Pads::same(1), 1, true)},
      {"3x3 no pad, no bias", {2, 6, 6}, 3, conv_spec(3, 3, 3, 1, 1, {}, 1, false)},
      {"grouped 4->6, 2 groups", {4, 5, 5}, 2, conv_spec(6, 3, 3, 1, 1, Pads::same(1), 2, true)},
      {"depthwise 3x3", {3, 6, 6}, 2, conv_spec(3, 3, 3, 1, 1, Pads::same(1), 3, false)},
      {"depthwise 3x3 stride 2, bias", {4, 7, 7}, 2, conv_spec(4, 3, 3, 2, 2, Pads::same(1), 4, true)},
      {"depthwise multiplier 2", {2, 5, 5}, 2, conv_spec(4, 3, 3, 1, 1, Pads::same(1), 2, false)},
      {"3x3 stride 2 pad 1", {2, 7, 7}, 2, conv_spec(3, 3, 3, 2, 2, Pads::same(1), 1, false)},
      {"1x1 stride 2, bias", {3, 5, 5}, 2, conv_spec(2, 1, 1, 2, 2, {}, 1, true)},
      {"1x7 pad 0/3", {2, 5, 7}, 2, conv_spec(3, 1, 7, 1, 1, {0, 0, 3, 3}, 1, false)},
      {"7x1 pad 3/0, bias", {2, 7, 5}, 2, conv_spec(2, 7, 1, 1, 1, {3, 3, 0, 0}, 1, true)},
      {"3x2 strides 2x1, pads t0 b2 l1 r0, bias", {2, 6, 7}, 2, conv_spec(3, 3, 2, 2, 1, {0, 2, 1, 0}, 1, true)},
      {"3x3 strides 1x2, pads t2 b0 l0 r1", {3, 5, 6}, 2, conv_spec(2, 3, 3, 1, 2, {2, 0, 0, 1}, 1, false)},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    Problem p = make_problem(single_op(c.in, [&](Graph& g, int x) { return g.conv(x, "conv", c.spec); }), c.batch);
    expect_gradients(p);
  }
}

// ---------------------------------------------------------------------------------------------
// Batch normalisation

// Two channels, batch 2, 1x2 images: channel 0 holds {1, 2 | 3, 4}, channel 1 {10, 10 | 10, 14}.
Problem bn_hand_problem() {
  Problem p = make_problem(single_op({2, 1, 2}, [](Graph& g, int x) { return g.batch_norm(x, "bn"); }), 2);
  p.x = {1, 2, 10, 10, 3, 4, 10, 14};
  p.params = {2.0f, 0.5f, 0.5f, -1.0f};  // gamma {2, 0.5}, beta {0.5, -1}
  p.state = {0.0f, 1.0f, 1.0f, 2.0f};    // running mean {0, 1}, running var {1, 2}
  return p;
}

TEST(RefBatchNorm, TrainingForwardAndRunningStatsHandComputed) {
  Problem p = bn_hand_problem();
  const double eps = double(p.g.nodes[1].bn.eps), mom = double(p.g.nodes[1].bn.momentum);
  auto net = bound_network(p);
  const std::vector<float> y = forward_output(*net, p, {});
  // Channel 0: mean 2.5, biased var 1.25, unbiased 5/3. Channel 1: mean 11, var 3, unbiased 4.
  const double s0 = 2.0 / std::sqrt(1.25 + eps), s1 = 0.5 / std::sqrt(3.0 + eps);
  expect_near_all(y, {-1.5 * s0 + 0.5, -0.5 * s0 + 0.5, -1 * s1 - 1, -1 * s1 - 1,
                      0.5 * s0 + 0.5, 1.5 * s0 + 0.5, -1 * s1 - 1, 3 * s1 - 1});
  const std::vector<double> running = {(1 - mom) * 0 + mom * 2.5, (1 - mom) * 1 + mom * 11,
                                       (1 - mom) * 1 + mom * 5.0 / 3, (1 - mom) * 2 + mom * 4};
  expect_near_all(p.state, running);
  // A second training step moves the running statistics again from where they are.
  net->forward({});
  expect_near_all(p.state, {(1 - mom) * running[0] + mom * 2.5, (1 - mom) * running[1] + mom * 11,
                            (1 - mom) * running[2] + mom * 5.0 / 3, (1 - mom) * running[3] + mom * 4});
}

TEST(RefBatchNorm, InferenceUsesRunningStatsAndLeavesThemAlone) {
  Problem p = bn_hand_problem();
  p.state = {0.5f, -1.0f, 4.0f, 0.25f};
  const std::vector<float> state_before = p.state;
  const double eps = double(p.g.nodes[1].bn.eps);
  auto net = bound_network(p);
  ForwardArgs infer;
  infer.training = false;
  const std::vector<float> y = forward_output(*net, p, infer);
  std::vector<double> want;
  const double gamma[2] = {2, 0.5}, beta[2] = {0.5, -1}, mean[2] = {0.5, -1}, var[2] = {4, 0.25};
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < 2; ++i)
        want.push_back(gamma[c] * (double(p.x[size_t(n * 4 + c * 2 + i)]) - mean[c]) / std::sqrt(var[c] + eps) + beta[c]);
  expect_near_all(y, want);
  EXPECT_EQ(p.state, state_before);
}

TEST(RefBatchNorm, GradientsMatchFiniteDifferences) {
  struct Case {
    const char* name;
    Dims in;
    int batch;
    bool training;
  };
  for (const Case& c : {Case{"training 3x4x5, batch 2", {3, 4, 5}, 2, true},
                        Case{"training 2x3x3, batch 3", {2, 3, 3}, 3, true},
                        Case{"training 5x1x1 (after fc), batch 4", {5, 1, 1}, 4, true},
                        Case{"inference 3x4x5, batch 2", {3, 4, 5}, 2, false}}) {
    SCOPED_TRACE(c.name);
    Problem p = make_problem(single_op(c.in, [](Graph& g, int x) { return g.batch_norm(x, "bn"); }), c.batch);
    ForwardArgs args;
    args.training = c.training;
    expect_gradients(p, args);
  }
}

// ---------------------------------------------------------------------------------------------
// ReLU and ReLU6

TEST(RefActivation, ForwardValues) {
  const std::vector<float> x = {-3, -0.5f, 0, 0.5f, 5.5f, 6, 7, 100};
  Problem relu = make_problem(single_op({8, 1, 1}, [](Graph& g, int in) { return g.relu(in, "relu"); }), 1);
  relu.x = x;
  auto net = bound_network(relu);
  expect_near_all(forward_output(*net, relu, {}), {0, 0, 0, 0.5, 5.5, 6, 7, 100});
  Problem relu6 = make_problem(single_op({8, 1, 1}, [](Graph& g, int in) { return g.relu6(in, "relu6"); }), 1);
  relu6.x = x;
  net = bound_network(relu6);
  expect_near_all(forward_output(*net, relu6, {}), {0, 0, 0, 0.5, 5.5, 6, 6, 6});
}

TEST(RefActivation, GradientsMatchFiniteDifferences) {
  {
    SCOPED_TRACE("relu");
    Problem p = make_problem(single_op({3, 5, 5}, [](Graph& g, int x) { return g.relu(x, "relu"); }), 2);
    p.x = Rng(3).away_from_zero(p.x.size());
    expect_gradients(p);
  }
  {
    SCOPED_TRACE("relu6");
    Problem p = make_problem(single_op({3, 5, 5}, [](Graph& g, int x) { return g.relu6(x, "relu6"); }), 2);
    Rng rng(4);
    for (float& v : p.x) {  // in [-2, 8], at least 0.1 from both kinks
      do v = rng.uniform(-2, 8);
      while (std::abs(v) < 0.1f || std::abs(v - 6) < 0.1f);
    }
    size_t above_six = 0;
    for (float v : p.x) above_six += v > 6;
    EXPECT_GT(above_six, 0u);
    expect_gradients(p);
  }
}

// ---------------------------------------------------------------------------------------------
// Pooling

PoolSpec pool_spec(int kh, int kw, int stride_h, int stride_w, Pads pad, bool exclude_padding = false) {
  return {kh, kw, stride_h, stride_w, pad, exclude_padding};
}

TEST(RefPool, MaxPoolPaddingNeverWins) {
  const PoolSpec s = pool_spec(3, 3, 1, 1, Pads::same(1));
  Problem p = make_problem(single_op({1, 3, 3}, [&](Graph& g, int x) { return g.max_pool(x, "pool", s); }), 1);
  p.x = {-9, -8, -7, -6, -5, -4, -3, -2, -1};
  auto net = bound_network(p);
  expect_near_all(forward_output(*net, p, {}), {-5, -4, -4, -2, -1, -1, -2, -1, -1});
}

TEST(RefPool, MaxPoolTiesSendTheGradientToTheFirstMax) {
  const PoolSpec s = pool_spec(3, 3, 1, 1, Pads::same(1));
  Problem p = make_problem(single_op({1, 2, 2}, [&](Graph& g, int x) { return g.max_pool(x, "pool", s); }), 1);
  p.x = {-1, -1, -1, -1};
  p.r[0] = {1, 1, 1, 1};
  auto net = bound_network(p);
  const Grads g = analytic_grads(*net, p, {});
  // Every window covers all four pixels; each sends its gradient to the first, (0, 0).
  expect_near_all(g.dx, {4, 0, 0, 0});
}

TEST(RefPool, AvgPoolIncludeVsExcludePaddingHandComputed) {
  for (bool exclude : {false, true}) {
    SCOPED_TRACE(exclude ? "exclude padding" : "include padding");
    const PoolSpec s = pool_spec(3, 3, 1, 1, Pads::same(1), exclude);
    Problem p = make_problem(single_op({1, 3, 3}, [&](Graph& g, int x) { return g.avg_pool(x, "pool", s); }), 1);
    p.x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    auto net = bound_network(p);
    const std::vector<float> y = forward_output(*net, p, {});
    // Corner: 1+2+4+5 over 4 taps inside; edge: 1+...+6 over 6; centre: 45 over 9.
    EXPECT_NEAR(y[0], exclude ? 12.0 / 4 : 12.0 / 9, 1e-6);
    EXPECT_NEAR(y[1], exclude ? 21.0 / 6 : 21.0 / 9, 1e-6);
    EXPECT_NEAR(y[4], 5.0, 1e-6);
    // The corner's gradient spreads over its taps with the same divisor.
    p.r[0] = {1, 0, 0, 0, 0, 0, 0, 0, 0};
    const Grads g = analytic_grads(*net, p, {});
    const double share = exclude ? 0.25 : 1.0 / 9;
    expect_near_all(g.dx, {share, share, 0, share, share, 0, 0, 0, 0});
  }
}

TEST(RefPool, GradientsMatchFiniteDifferences) {
  struct Case {
    const char* name;
    bool max;
    Dims in;
    PoolSpec spec;
  };
  const std::vector<Case> cases = {
      {"max 3x3 stride 2 pad 1", true, {2, 7, 7}, pool_spec(3, 3, 2, 2, Pads::same(1))},
      {"max 2x2 stride 2", true, {3, 6, 6}, pool_spec(2, 2, 2, 2, {})},
      {"max 3x2 strides 1x2, pads t1 b0 l0 r1", true, {2, 5, 6}, pool_spec(3, 2, 1, 2, {1, 0, 0, 1})},
      {"avg 3x3 stride 2 pad 1, include padding", false, {2, 6, 6}, pool_spec(3, 3, 2, 2, Pads::same(1), false)},
      {"avg 3x3 stride 2 pad 1, exclude padding", false, {2, 6, 6}, pool_spec(3, 3, 2, 2, Pads::same(1), true)},
      {"avg 3x3 stride 1 pad 1, exclude padding", false, {2, 5, 5}, pool_spec(3, 3, 1, 1, Pads::same(1), true)},
      {"avg 2x3 pads t1 b0 l2 r0, exclude padding", false, {2, 5, 6}, pool_spec(2, 3, 1, 1, {1, 0, 2, 0}, true)},
      {"avg 5x5 stride 3 no pad", false, {2, 7, 7}, pool_spec(5, 5, 3, 3, {}, false)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Problem p = make_problem(single_op(c.in, [&](Graph& g, int x) {
                               return c.max ? g.max_pool(x, "pool", c.spec) : g.avg_pool(x, "pool", c.spec);
                             }),
                             2);
    p.x = Rng(5).distinct(p.x.size());
    expect_gradients(p);
  }
}

// ---------------------------------------------------------------------------------------------
// Concatenation

TEST(RefConcat, SameInputTwiceSumsBothGradients) {
  Problem p = make_problem(single_op({2, 2, 2}, [](Graph& g, int x) { return g.concat({x, x}, "cat"); }), 2);
  auto net = bound_network(p);
  const std::vector<float> y = forward_output(*net, p, {});
  const Grads g = analytic_grads(*net, p, {});
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(y[size_t(n * 16 + i)], p.x[size_t(n * 8 + i)]);
      EXPECT_EQ(y[size_t(n * 16 + 8 + i)], p.x[size_t(n * 8 + i)]);
      EXPECT_FLOAT_EQ(g.dx[size_t(n * 8 + i)], p.r[0][size_t(n * 16 + i)] + p.r[0][size_t(n * 16 + 8 + i)]);
    }
}

TEST(RefConcat, ForwardLayoutAndGradients) {
  Graph g;
  const int x = g.input({2, 4, 4});
  const int a = g.conv(x, "a", conv_spec(3, 1, 1, 1, 1, {}, 1, true));
  const int b = g.conv(x, "b", conv_spec(1, 3, 3, 1, 1, Pads::same(1), 1, false));
  const int cat = g.concat({a, x, b}, "cat");
  g.add_output(cat);
  Problem p = make_problem(g, 3);
  ASSERT_EQ(p.g.nodes[cat].out, (Dims{6, 4, 4}));
  auto net = bound_network(p);
  const std::vector<float> y = forward_output(*net, p, {});
  for (int n = 0; n < 3; ++n)  // channels 3 and 4 of each sample are the input's
    for (int i = 0; i < 32; ++i) EXPECT_EQ(y[size_t(n * 96 + 48 + i)], p.x[size_t(n * 32 + i)]);
  expect_gradients(p);
}

// ---------------------------------------------------------------------------------------------
// Fully connected

TEST(RefFc, ForwardFlattensNchw) {
  FcSpec s;
  s.out_features = 3;
  Problem p = make_problem(single_op({2, 2, 3}, [&](Graph& g, int x) { return g.fc(x, "fc", s); }), 2);
  const float* w = p.params.data() + p.g.params[0].offset;
  const float* b = p.params.data() + p.g.params[1].offset;
  std::vector<double> want;
  for (int n = 0; n < 2; ++n)
    for (int o = 0; o < 3; ++o) {
      double acc = b[o];
      for (int c = 0; c < 2; ++c)
        for (int h = 0; h < 2; ++h)
          for (int ww = 0; ww < 3; ++ww) {
            const int feature = (c * 2 + h) * 3 + ww;
            acc += double(w[o * 12 + feature]) * double(p.x[size_t(n * 12 + feature)]);
          }
      want.push_back(acc);
    }
  auto net = bound_network(p);
  expect_near_all(forward_output(*net, p, {}), want);
}

TEST(RefFc, GradientsMatchFiniteDifferences) {
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    FcSpec s;
    s.out_features = 4;
    s.bias = bias;
    Problem p = make_problem(single_op({3, 4, 5}, [&](Graph& g, int x) { return g.fc(x, "fc", s); }), 3);
    expect_gradients(p);
  }
}

// ---------------------------------------------------------------------------------------------
// Dropout

Graph dropout_graph(Dims in, float rate) {
  return single_op(in, [&](Graph& g, int x) { return g.dropout(x, "drop", rate); });
}

TEST(RefDropout, ForwardFollowsDropoutKeepAndInferenceIsIdentity) {
  const float rate = 0.4f;
  Problem p = make_problem(dropout_graph({3, 4, 4}, rate), 2);
  ForwardArgs args;
  args.seed = 7;
  args.step = 3;
  args.sample_offset = 10;
  auto net = bound_network(p);
  const std::vector<float> y = forward_output(*net, p, args);
  const float scale = 1.0f / (1.0f - rate);
  int kept = 0;
  for (int n = 0; n < 2; ++n)
    for (int e = 0; e < 48; ++e) {
      const size_t k = size_t(n * 48 + e);
      const bool keep = dropout_keep(7, 3, 1, 10 + n, e, rate);
      kept += keep;
      EXPECT_FLOAT_EQ(y[k], keep ? p.x[k] * scale : 0.0f) << "sample " << n << " element " << e;
    }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 96);
  // Backward applies the same mask and scale.
  const Grads g = analytic_grads(*net, p, args);
  for (size_t k = 0; k < g.dx.size(); ++k) EXPECT_FLOAT_EQ(g.dx[k], y[k] != 0 ? p.r[0][k] * scale : 0.0f);
  ForwardArgs infer = args;
  infer.training = false;
  EXPECT_EQ(forward_output(*net, p, infer), p.x);
}

TEST(RefDropout, KeptFractionIsNearOneMinusRate) {
  for (float rate : {0.3f, 0.5f}) {
    Problem p = make_problem(dropout_graph({16, 32, 32}, rate), 4);
    std::fill(p.x.begin(), p.x.end(), 1.0f);
    auto net = bound_network(p);
    ForwardArgs args;
    args.seed = 11;
    const std::vector<float> y = forward_output(*net, p, args);
    size_t kept = 0;
    for (float v : y) {
      if (v != 0) {
        ++kept;
        EXPECT_EQ(v, 1.0f / (1.0f - rate));
      }
    }
    // 65536 elements: one standard deviation of the fraction is below 0.002.
    EXPECT_NEAR(double(kept) / double(y.size()), 1.0 - rate, 0.01) << "rate " << rate;
  }
}

TEST(RefDropout, MaskFollowsTheGlobalSampleIndex) {
  const Dims in{2, 4, 4};
  const int64_t per_sample = in.numel();
  Problem whole = make_problem(dropout_graph(in, 0.5f), 4);
  std::fill(whole.x.begin(), whole.x.end(), 1.0f);
  Problem half = make_problem(dropout_graph(in, 0.5f), 2);
  std::fill(half.x.begin(), half.x.end(), 1.0f);
  ForwardArgs args;
  args.seed = 5;
  args.step = 9;
  auto net4 = bound_network(whole);
  const std::vector<float> y4 = forward_output(*net4, whole, args);
  auto net2 = bound_network(half);
  args.sample_offset = 2;  // the second half of the batch of 4, e.g. on rank 1
  const std::vector<float> y2 = forward_output(*net2, half, args);
  EXPECT_TRUE(std::equal(y2.begin(), y2.end(), y4.begin() + 2 * per_sample));
  args.sample_offset = 0;
  const std::vector<float> first = forward_output(*net2, half, args);
  EXPECT_TRUE(std::equal(first.begin(), first.end(), y4.begin()));
  EXPECT_NE(first, y2) << "samples 0-1 and 2-3 drew the same mask";
  args.step = 10;
  EXPECT_NE(forward_output(*net2, half, args), first) << "the mask did not change with the step";
}

TEST(RefDropout, GradientsMatchFiniteDifferences) {
  Problem p = make_problem(dropout_graph({3, 5, 5}, 0.3f), 3);
  ForwardArgs args;
  args.seed = 21;
  args.step = 2;
  args.sample_offset = 6;
  expect_gradients(p, args);
}

// ---------------------------------------------------------------------------------------------
// Graphs: fan-out (gradients summed over consumers) and several outputs

TEST(RefGraph, FanOutGradientsAccumulate) {
  Graph g;
  const int x = g.input({3, 6, 6});
  const int a = g.conv(x, "a", conv_spec(4, 3, 3, 1, 1, Pads::same(1), 1, true));
  const int bn = g.batch_norm(a, "bn");
  // bn feeds three branches and x a fourth, all concatenated (Inception style, no residual).
  const int b1 = g.conv(bn, "b1", conv_spec(2, 1, 1, 1, 1, {}, 1, false));
  const int b2 = g.conv(bn, "b2", conv_spec(3, 3, 3, 1, 1, Pads::same(1), 1, true));
  const int b3 = g.avg_pool(bn, "b3", pool_spec(3, 3, 1, 1, Pads::same(1), true));
  const int b4 = g.conv(x, "b4", conv_spec(2, 1, 1, 1, 1, {}, 1, false));
  const int cat = g.concat({b1, b2, b3, b4}, "cat");
  const int drop = g.dropout(cat, "drop", 0.25f);
  FcSpec fs;
  fs.out_features = 5;
  g.add_output(g.fc(drop, "fc", fs));
  Problem p = make_problem(g, 2, 3);
  ForwardArgs args;
  args.seed = 4;
  expect_gradients(p, args);
}

Graph two_output_graph() {
  Graph g;
  const int x = g.input({2, 5, 5});
  const int a = g.conv(x, "a", conv_spec(3, 3, 3, 1, 1, Pads::same(1), 1, true));
  const int pool = g.avg_pool(a, "pool", pool_spec(2, 2, 2, 2, {}));
  FcSpec fs;
  fs.out_features = 4;
  const int fc = g.fc(pool, "fc", fs);
  g.add_output(fc, 1.0f);
  g.add_output(a, 0.4f);  // also consumed by the pool: its gradient adds to the pool's
  return g;
}

TEST(RefGraph, TwoOutputsGradientsMatchFiniteDifferences) {
  Problem p = make_problem(two_output_graph(), 2, 9);
  expect_gradients(p);
}

TEST(RefGraph, OutputGradientsNotSetSinceTheLastBackwardAreZero) {
  Problem p = make_problem(two_output_graph(), 2, 9);
  auto net = bound_network(p);
  // Reference: the loss on output 0 only (output 1's dy explicitly zero).
  net->set_input(p.x.data());
  net->forward({});
  net->set_output_grad(0, p.r[0].data());
  const std::vector<float> zeros(p.r[1].size(), 0.0f);
  net->set_output_grad(1, zeros.data());
  net->backward();
  const std::vector<float> want = p.grads;
  // Both set for one backward, then only output 0 for the next: output 1 must count as zero.
  net->set_output_grad(0, p.r[0].data());
  net->set_output_grad(1, p.r[1].data());
  net->backward();
  EXPECT_NE(p.grads, want);
  net->set_output_grad(0, p.r[0].data());
  net->backward();
  EXPECT_EQ(p.grads, want);
}

// ---------------------------------------------------------------------------------------------
// The Network contract

Graph contract_graph() {
  Graph g;
  const int x = g.input({2, 6, 6});
  const int c1 = g.conv(x, "c1", conv_spec(3, 3, 3, 1, 1, Pads::same(1), 1, true));
  const int bn = g.batch_norm(c1, "bn");
  const int r = g.relu(bn, "relu");
  const int mp = g.max_pool(r, "pool", pool_spec(2, 2, 2, 2, {}));
  const int c2 = g.conv(mp, "c2", conv_spec(4, 3, 3, 1, 1, Pads::same(1), 1, false));
  const int r6 = g.relu6(c2, "relu6");
  const int drop = g.dropout(r6, "drop", 0.5f);
  FcSpec fs;
  fs.out_features = 3;
  g.add_output(g.fc(drop, "fc", fs));
  return g;
}

TEST(RefNetwork, ParamGradsReadyInReverseRegistrationOrder) {
  Problem p = make_problem(contract_graph(), 2);
  auto net = bound_network(p);
  const float sentinel = std::numeric_limits<float>::quiet_NaN();
  std::fill(p.grads.begin(), p.grads.end(), sentinel);
  net->set_input(p.x.data());
  net->forward({});
  net->set_output_grad(0, p.r[0].data());
  std::vector<int> calls;
  std::vector<std::vector<float>> seen;  // each node's grads at its callback
  net->backward([&](int node) {
    calls.push_back(node);
    std::vector<float> snapshot;
    for (int t : p.g.nodes[node].params) {
      const ParamTensor& pt = p.g.params[t];
      snapshot.insert(snapshot.end(), p.grads.begin() + long(pt.offset), p.grads.begin() + long(pt.offset + pt.numel));
    }
    seen.push_back(snapshot);
    // Nodes registered earlier have not been written yet.
    for (const ParamTensor& pt : p.g.params) {
      if (pt.node < node) {
        EXPECT_TRUE(std::isnan(p.grads[pt.offset])) << pt.name << " written before " << node;
      }
    }
  });
  // Once per parameterised node, in the order params_backprop_order() lists their tensors.
  std::vector<int> want;
  for (const ParamTensor* pt : p.g.params_backprop_order())
    if (want.empty() || want.back() != pt->node) want.push_back(pt->node);
  EXPECT_EQ(calls, want);
  EXPECT_EQ(calls, (std::vector<int>{8, 5, 2, 1}));  // fc, c2, bn, c1
  // What a callback saw was final.
  for (size_t i = 0; i < calls.size(); ++i) {
    size_t k = 0;
    for (int t : p.g.nodes[calls[i]].params) {
      const ParamTensor& pt = p.g.params[t];
      for (size_t e = 0; e < pt.numel; ++e) EXPECT_EQ(seen[i][k++], p.grads[pt.offset + e]) << pt.name;
    }
  }
  for (float v : p.grads) ASSERT_FALSE(std::isnan(v));
}

TEST(RefNetwork, BackwardOverwritesGradients) {
  Problem p = make_problem(contract_graph(), 2);
  auto net = bound_network(p);
  std::fill(p.grads.begin(), p.grads.end(), 1e6f);
  net->set_input(p.x.data());
  net->forward({});
  net->set_output_grad(0, p.r[0].data());
  net->backward();
  const std::vector<float> first = p.grads;
  for (float v : first) ASSERT_LT(std::abs(v), 1e3f);
  net->set_output_grad(0, p.r[0].data());
  net->backward();
  EXPECT_EQ(p.grads, first);
  std::vector<float> dx1(p.x.size()), dx2(p.x.size());
  net->get_input_grad(dx1.data());
  net->set_output_grad(0, p.r[0].data());
  net->backward();
  net->get_input_grad(dx2.data());
  EXPECT_EQ(dx1, dx2);
}

TEST(RefNetwork, TraceCoversEveryNodeInOrder) {
  Problem p = make_problem(contract_graph(), 2);
  auto net = bound_network(p);
  std::vector<int> fwd, bwd;
  net->set_trace([&](int node, Phase phase, auto begin, auto end) {
    EXPECT_LE(begin, end);
    (phase == Phase::forward ? fwd : bwd).push_back(node);
  });
  net->set_input(p.x.data());
  net->forward({});
  net->set_output_grad(0, p.r[0].data());
  net->backward();
  std::vector<int> want;
  for (int i = 1; i < int(p.g.nodes.size()); ++i) want.push_back(i);
  EXPECT_EQ(fwd, want);
  std::reverse(want.begin(), want.end());
  EXPECT_EQ(bwd, want);
}

TEST(RefNetwork, MisuseThrows) {
  Problem p = make_problem(contract_graph(), 2);
  auto net = make_reference_network(p.g, p.batch);
  EXPECT_EQ(net->backend(), "reference");
  EXPECT_EQ(net->batch(), 2);
  EXPECT_NE(net->describe().find("reference"), std::string::npos);
  net->set_input(p.x.data());
  EXPECT_THROW(net->forward({}), std::logic_error);
  EXPECT_THROW(net->backward(), std::logic_error);
  net->bind(p.params.data(), p.grads.data(), p.state.data());
  EXPECT_THROW(net->backward(), std::logic_error);
  std::vector<float> y(p.count(p.g.outputs[0].node));
  EXPECT_THROW(net->get_output(0, y.data()), std::logic_error);
  net->forward({});
  EXPECT_THROW(net->get_output(1, y.data()), std::out_of_range);
  EXPECT_THROW(net->set_output_grad(1, y.data()), std::out_of_range);
  EXPECT_NO_THROW(net->backward());
  EXPECT_THROW(make_reference_network(p.g, 0), std::invalid_argument);
}

}  // namespace
}  // namespace ringbench::models
