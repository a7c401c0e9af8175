// The reference backend's layers against hand-computed forward values and finite-difference
// gradients (the method and tolerances: tests/ref_test_problem.h): convolution, batch norm,
// activations and pooling.
#include "tests/ref_test_problem.h"

namespace ringbench::models {
namespace {

using namespace ref_testing;

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

}  // namespace
}  // namespace ringbench::models
