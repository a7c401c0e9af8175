// The reference backend's concat, fully connected and dropout layers, and whole graphs (fan-out,
// two outputs, the network contract: gradient readiness order, overwriting, tracing, misuse),
// against hand-computed values and finite differences (tests/ref_test_problem.h).
#include "tests/ref_test_problem.h"

namespace ringbench::models {
namespace {

using namespace ref_testing;

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
