// The oneDNN backend against the reference backend: per op and variant, then whole graphs, on
// random inputs, parameters and output gradients at small shapes. Outputs, the input gradient,
// every parameter gradient and the batch-norm state must agree within `tol` relative to each
// tensor's largest magnitude (the reference accumulates in double, oneDNN in float). The
// helpers are in backend_compare.h, shared with the CUDA backend's test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend_compare.h"
#include "models/backends.h"
#include "models/dnnl_network.h"
#include "models/graph.h"
#include "models/network.h"
#include "models/zoo.h"

namespace ringbench::models {
namespace {

using namespace backend_test;

void check_graph(const Graph& g, const CheckOptions& o = {}) { compare_with_reference(backend("onednn"), g, o); }

// ---------------------------------------------------------------------------------------------
// Convolution

struct ConvCase {
  std::string name;
  Dims in;
  int pre;  // channels of a conv before (0: on the input itself)
  ConvSpec spec;
};

class DnnlConv : public ::testing::TestWithParam<ConvCase> {};

TEST_P(DnnlConv, MatchesReference) {
  const ConvCase& c = GetParam();
  check_graph(single_op(c.in, c.pre, [&](Graph& g, int x) { return g.conv(x, "conv", c.spec); }));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, DnnlConv,
    ::testing::Values(
        ConvCase{"plain3x3_on_input", {3, 9, 9}, 0, conv(8, 3, 3, 1, Pads::same(1))},
        ConvCase{"bias_on_input", {3, 9, 9}, 0, conv(16, 3, 3, 1, Pads::same(1), 1, true)},
        ConvCase{"blocked16to32", {3, 8, 8}, 16, conv(32, 3, 3, 1, Pads::same(1))},
        ConvCase{"blocked_bias", {3, 8, 8}, 16, conv(16, 3, 3, 1, Pads::same(1), 1, true)},
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
        ConvCase{"kernel_eq_input", {3, 5, 5}, 16, conv(16, 5, 5)}),
    [](const ::testing::TestParamInfo<ConvCase>& p) { return p.param.name; });

// ---------------------------------------------------------------------------------------------
// Batch norm, relu, relu6, pooling

TEST(DnnlBatchNorm, TrainingRunningStatsAndInference) {
  for (int pre : {0, 16, 5}) {
    SCOPED_TRACE("pre-conv channels " + std::to_string(pre));
    check_graph(single_op({3, 6, 5}, pre, [](Graph& g, int x) { return g.batch_norm(x, "bn", {1e-3f, 0.1f}); }, false),
                {.batch = 3, .tol = 2e-4});
  }
}

TEST(DnnlBatchNorm, MomentumAndEps) {
  check_graph(single_op({3, 4, 4}, 32, [](Graph& g, int x) { return g.batch_norm(x, "bn", {1e-5f, 0.9f}); }, false),
              {.batch = 2, .tol = 2e-4});
}

TEST(DnnlBatchNorm, AfterFc) {  // per-channel statistics over the batch only (h = w = 1)
  check_graph(single_op({3, 4, 4}, 0, [](Graph& g, int x) { return g.batch_norm(g.fc(x, "fc", {24, false}), "bn"); }),
              {.batch = 4, .tol = 2e-4});
}

TEST(DnnlEltwise, Relu) {
  for (int pre : {0, 16})
    check_graph(single_op({3, 5, 5}, pre, [](Graph& g, int x) { return g.relu(x, "relu"); }));
}

TEST(DnnlEltwise, Relu6) {
  // Inputs in [-8, 8] so that both ends of the clip are hit, directly and after a conv.
  for (int pre : {0, 16}) {
    const Graph g = single_op({3, 5, 5}, pre, [](Graph& gr, int x) { return gr.relu6(x, "relu6"); });
    check_graph(g, {.seed = 3, .input_scale = 8});
  }
}

struct PoolCase {
  std::string name;
  bool max;
  int pre;
  PoolSpec spec;
};

class DnnlPool : public ::testing::TestWithParam<PoolCase> {};

TEST_P(DnnlPool, MatchesReference) {
  const PoolCase& c = GetParam();
  check_graph(single_op({3, 9, 9}, c.pre, [&](Graph& g, int x) {
    return c.max ? g.max_pool(x, "pool", c.spec) : g.avg_pool(x, "pool", c.spec);
  }));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, DnnlPool,
    ::testing::Values(PoolCase{"max2x2", true, 16, pool(2, 2)}, PoolCase{"max3x3s2", true, 32, pool(3, 2)},
                      PoolCase{"max3x3s1_pad", true, 16, pool(3, 1, Pads::same(1))},
                      PoolCase{"max_asym_pad", true, 16, pool(3, 2, {0, 1, 1, 2})},
                      PoolCase{"max_on_input", true, 0, pool(3, 2, Pads::same(1))},
                      PoolCase{"avg_include", false, 16, pool(3, 1, Pads::same(1))},
                      PoolCase{"avg_exclude", false, 16, pool(3, 1, Pads::same(1), true)},
                      PoolCase{"avg_include_s2_asym", false, 16, pool(3, 2, {1, 0, 2, 1})},
                      PoolCase{"avg_exclude_s2_asym", false, 16, pool(3, 2, {1, 0, 2, 1}, true)},
                      PoolCase{"avg_global", false, 32, pool(9, 1)},
                      PoolCase{"avg_exclude_on_input", false, 0, pool(3, 1, Pads::same(1), true)},
                      PoolCase{"avg_odd_channels", false, 5, pool(2, 2, {1, 0, 1, 0}, true)}),
    [](const ::testing::TestParamInfo<PoolCase>& p) { return p.param.name; });

// ---------------------------------------------------------------------------------------------
// Concat, fc, dropout (concat_graph: backend_compare.h)

TEST(DnnlConcat, BlockedChannelCounts) {
  check_graph(concat_graph({16, 32}, false));
  check_graph(concat_graph({16, 32, 16}, true));
}

TEST(DnnlConcat, OddChannelCounts) {
  check_graph(concat_graph({0, 5}, true));   // the input's 3 channels and 5
  check_graph(concat_graph({3, 5}, false));
  check_graph(concat_graph({16, 5, 32}, true));
}

TEST(DnnlConcat, SameInputTwice) {
  Graph g;
  const int x = g.input({3, 5, 5});
  const int a = g.conv(x, "a", conv(16, 3, 3, 1, Pads::same(1)));
  g.add_output(g.relu(g.concat({a, a, x}, "concat"), "relu"));
  check_graph(g);
}

TEST(DnnlFc, From4dBlocked) {
  check_graph(single_op({3, 5, 4}, 16, [](Graph& g, int x) { return g.fc(x, "fc", {10, true}); }));
  check_graph(single_op({3, 5, 4}, 5, [](Graph& g, int x) { return g.fc(x, "fc", {7, false}); }));
}

TEST(DnnlFc, FromInputAndChained) {
  check_graph(single_op({3, 5, 4}, 0, [](Graph& g, int x) {
    return g.fc(g.relu(g.fc(x, "fc0", {33, true}), "relu"), "fc1", {10, true});
  }));
}

TEST(DnnlDropout, MasksEqualReference) {
  const Graph g = single_op({2, 6, 5}, 0, [](Graph& gr, int x) { return gr.dropout(x, "drop", 0.4f); });
  const int batch = 3;
  std::vector<float> params, state;
  random_params(g, 1, params, state);
  const std::vector<float> x = random_vector(in_count(g, batch), 5, 0.5f, 1.5f);  // never 0
  const std::vector<std::vector<float>> dys{random_vector(out_count(g, 0, batch), 6)};
  for (uint64_t step : {0, 1, 7}) {
    const ForwardArgs args{.training = true, .seed = 42, .step = step, .sample_offset = int64_t(step) * batch};
    const StepResult want = run_step("reference", g, batch, params, state, x, dys, args);
    const StepResult got = run_step("onednn", g, batch, params, state, x, dys, args);
    EXPECT_EQ(got.outputs[0], want.outputs[0]) << "step " << step;
    EXPECT_EQ(got.dx, want.dx) << "step " << step;
    const auto dropped = std::count(got.outputs[0].begin(), got.outputs[0].end(), 0.0f);
    EXPECT_GT(dropped, 0);
    EXPECT_LT(dropped, int64_t(got.outputs[0].size()));
  }
  // Inference: identity.
  const StepResult inf = run_step("onednn", g, batch, params, state, x, dys, {.training = false});
  EXPECT_EQ(inf.outputs[0], x);
  EXPECT_EQ(inf.dx, dys[0]);
}

TEST(DnnlDropout, AfterBlockedConvBeforeFc) {
  check_graph(single_op({3, 4, 4}, 16, [](Graph& g, int x) { return g.fc(g.dropout(x, "drop", 0.5f), "fc", {6, true}); }));
}

// ---------------------------------------------------------------------------------------------
// Whole graphs (lenet_like, inception_like: backend_compare.h)

TEST(DnnlGraph, LenetLike) { check_graph(lenet_like(), {.batch = 3}); }

TEST(DnnlGraph, InceptionLikeBlock) { check_graph(inception_like(false), {.batch = 2, .tol = 3e-4}); }

TEST(DnnlGraph, TwoOutputs) {
  const Graph g = inception_like(true);
  check_graph(g, {.batch = 2, .tol = 3e-4});
  // Only one output's gradient set: the other counts as zero.
  std::vector<float> params, state;
  random_params(g, 9, params, state);
  const std::vector<float> x = random_vector(in_count(g, 2), 10);
  for (size_t only : {0, 1}) {
    std::vector<std::vector<float>> dys(2);
    dys[only] = random_vector(out_count(g, only, 2), 11);
    const ForwardArgs args{.training = true, .seed = 1};
    const StepResult want = run_step("reference", g, 2, params, state, x, dys, args);
    const StepResult got = run_step("onednn", g, 2, params, state, x, dys, args);
    expect_same_step(g, got, want, 3e-4, "only output " + std::to_string(only));
  }
}

// A node feeding consumers of every kind, whose gradients must be summed across layouts.
TEST(DnnlGraph, FanOutAcrossLayouts) {
  Graph g;
  const int x = g.input({3, 7, 7});
  const int a = g.conv(x, "a", conv(16, 3, 3, 1, Pads::same(1), 1, true));
  const int r = g.relu(a, "r");
  const int p = g.max_pool(a, "p", pool(3, 1, Pads::same(1)));
  const int c = g.conv(a, "c", conv(5, 3, 3, 1, Pads::same(1)));
  const int d = g.conv(x, "d", conv(3, 1, 1));  // the input has two consumers too
  const int cat = g.concat({r, p, c, d}, "cat");
  g.add_output(g.fc(g.dropout(cat, "drop", 0.3f), "fc", {4, true}));
  g.add_output(g.relu(a, "side"), 0.5f);  // a is also an output's producer
  check_graph(g, {.batch = 2});
}

TEST(DnnlGraph, BatchNormOnInputKeepsInputGradient) {  // no deferral of the input gradient
  Graph g;
  const int x = g.input({3, 5, 5});
  const int bn = g.batch_norm(x, "bn");
  const int c = g.conv(x, "c", conv(3, 3, 3, 1, Pads::same(1)));
  g.add_output(g.concat({bn, c}, "cat"));
  check_graph(g, {.batch = 3, .tol = 2e-4});
}

TEST(DnnlGraph, SecondStepAndRebind) {
  // Two steps on one network: running statistics accumulate, gradients are overwritten, and a
  // rebind to other buffers takes effect.
  const Graph g = inception_like(false);
  const int batch = 2;
  std::vector<float> params, state;
  random_params(g, 4, params, state);
  std::vector<std::unique_ptr<Network>> nets;
  std::vector<std::vector<float>> p(2, params), s(2, state), gr(2, std::vector<float>(g.param_count));
  for (const char* b : {"reference", "onednn"}) nets.push_back(make_network(b, g, batch));
  for (int step = 0; step < 2; ++step) {
    const std::vector<float> x = random_vector(in_count(g, batch), 20 + uint32_t(step));
    const std::vector<float> dy = random_vector(out_count(g, 0, batch), 30 + uint32_t(step));
    for (size_t k = 0; k < 2; ++k) {
      if (step == 1) {  // a fresh parameter copy, slightly changed, bound anew
        for (float& v : p[k]) v *= 0.9f;
        nets[k]->bind(p[k].data(), gr[k].data(), s[k].data());
      } else {
        nets[k]->bind(p[k].data(), gr[k].data(), s[k].data());
      }
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

// ---------------------------------------------------------------------------------------------
// Interface behaviour

TEST(DnnlNetwork, ParamGradsCallbackOrderAndFinality) {
  const Graph g = inception_like(true);
  const int batch = 2;
  std::vector<float> params, state;
  random_params(g, 2, params, state);
  std::vector<float> grads(g.param_count, 0.0f);
  auto net = make_network("onednn", g, batch);
  EXPECT_EQ(net->backend(), "onednn");
  net->bind(params.data(), grads.data(), state.data());
  const std::vector<float> x = random_vector(in_count(g, batch), 3);
  net->set_input(x.data());
  net->forward({});
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const std::vector<float> dy = random_vector(out_count(g, i, batch), 4 + uint32_t(i));
    net->set_output_grad(i, dy.data());
  }
  std::vector<int> order;
  std::vector<std::vector<float>> snapshot;
  std::vector<int> traced;
  net->set_trace([&](int node, Phase phase, auto begin, auto end) {
    EXPECT_LE(begin, end);
    if (phase == Phase::backward) traced.push_back(node);
  });
  net->backward([&](int node) {
    order.push_back(node);
    for (int k : g.nodes[node].params) {
      const ParamTensor& t = g.params[k];
      snapshot.emplace_back(grads.begin() + long(t.offset), grads.begin() + long(t.offset + t.numel));
    }
  });
  // Every node with parameters, in reverse order, and their gradients untouched afterwards.
  std::vector<int> expected;
  for (int i = int(g.nodes.size()) - 1; i >= 1; --i)
    if (!g.nodes[i].params.empty()) expected.push_back(i);
  EXPECT_EQ(order, expected);
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

TEST(DnnlNetwork, OutputGradientsResetAfterBackward) {
  const Graph g = lenet_like();
  const int batch = 2;
  std::vector<float> params, state;
  random_params(g, 2, params, state);
  std::vector<float> grads(g.param_count);
  auto net = make_network("onednn", g, batch);
  net->bind(params.data(), grads.data(), state.data());
  const std::vector<float> x = random_vector(in_count(g, batch), 3);
  const std::vector<float> dy = random_vector(out_count(g, 0, batch), 4);
  net->set_input(x.data());
  net->forward({});
  net->set_output_grad(0, dy.data());
  net->backward();
  EXPECT_TRUE(std::any_of(grads.begin(), grads.end(), [](float v) { return v != 0; }));
  net->forward({});
  net->backward();  // no gradient set: all zero
  EXPECT_TRUE(std::all_of(grads.begin(), grads.end(), [](float v) { return v == 0; }));
}

TEST(DnnlNetwork, ForwardSanityByHand) {
  // 1x1 input channel, 2x2 image, conv 3x3 pad 1 with all-one weights and bias 0.5: each
  // output is the sum of the input's taps in the window plus 0.5.
  Graph g;
  const int x = g.input({1, 2, 2});
  g.add_output(g.conv(x, "c", conv(1, 3, 3, 1, Pads::same(1), 1, true)));
  std::vector<float> params(g.param_count, 1.0f), grads(g.param_count), state;
  params[9] = 0.5f;
  auto net = make_network("onednn", g, 1);
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

TEST(DnnlNetwork, DescribeAndErrors) {
  const Graph g = inception_like(false);
  auto net = make_network("onednn", g, 2);
  const std::string d = net->describe();
  EXPECT_NE(d.find("conv fwd"), std::string::npos) << d;
  EXPECT_NE(d.find("bn fwd"), std::string::npos) << d;
  EXPECT_NE(d.find("concat"), std::string::npos) << d;
  EXPECT_THROW(net->forward({}), std::logic_error);  // not bound
  EXPECT_THROW(net->bind(nullptr, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(make_network("onednn", g, 0), std::invalid_argument);
}

TEST(DnnlProfile, TimesEveryOp) {
  const Graph g = lenet_like();
  const std::vector<PrimitiveTime> t = profile_onednn_primitives(g, 2, 3);
  ASSERT_FALSE(t.empty());
  bool conv_fwd = false, conv_bwd = false;
  for (const PrimitiveTime& p : t) {
    EXPECT_GE(p.seconds, 0.0) << p.node << " " << p.what;
    EXPECT_GE(p.in_step_seconds, 0.0) << p.node << " " << p.what;
    conv_fwd = conv_fwd || (p.node == "conv0" && p.phase == Phase::forward && p.what.find("conv fwd") == 0);
    conv_bwd = conv_bwd || (p.node == "conv1" && p.phase == Phase::backward && p.what.find("conv bwd_data") == 0);
  }
  EXPECT_TRUE(conv_fwd);
  EXPECT_TRUE(conv_bwd);
}

// ---------------------------------------------------------------------------------------------
// The zoo's models, one step at small sizes, both backends, compared normwise. The forwards
// differ by float rounding (~1e-5 after dozens of batch norms); where a ReLU input lies within
// that of 0 the two backends route that element's gradient differently, and batch norm's
// backward spreads the difference over the channel: errors of 1e-3 to a few 1e-2 in norm, not
// rounding but not bugs either (a wrong layout or index gives errors of order 1). Sizes keep
// at least 8 values per channel in every batch norm: with 2 (Inception at 75 px, batch 2)
// its input gradient is pure cancellation noise on both backends.

TEST(DnnlZoo, MobilenetV1) {
  const Graph g = build_model("mobilenet_v1", {.classes = 10, .image_size = 64});
  check_graph(g, {.batch = 4, .tol = 1e-4, .normwise = true, .grad_tol = 5e-2});
}

TEST(DnnlZoo, InceptionV3) {  // (the aux head needs 299 px: too slow for the reference)
  const Graph g = build_model("inception_v3", {.classes = 10, .image_size = 107});
  check_graph(g, {.batch = 2, .tol = 1e-4, .inference_too = false, .normwise = true, .grad_tol = 1e-1});
}

}  // namespace
}  // namespace ringbench::models
