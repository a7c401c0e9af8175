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

NetworkFactory onednn() { return backend("onednn"); }

void check_graph(const Graph& g, const CheckOptions& o = {}) { compare_with_reference(onednn(), g, o); }

// ---------------------------------------------------------------------------------------------
// Convolution (the cases: backend_compare.h)

class DnnlConv : public ::testing::TestWithParam<ConvCase> {};

TEST_P(DnnlConv, MatchesReference) { check_conv(onednn(), GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Variants, DnnlConv,
    ::testing::ValuesIn(conv_cases({
        ConvCase{"blocked16to32", {3, 8, 8}, 16, conv(32, 3, 3, 1, Pads::same(1))},
        ConvCase{"blocked_bias", {3, 8, 8}, 16, conv(16, 3, 3, 1, Pads::same(1), 1, true)},
    })),
    [](const ::testing::TestParamInfo<ConvCase>& p) { return p.param.name; });

// ---------------------------------------------------------------------------------------------
// Batch norm, relu, relu6, pooling

TEST(DnnlBatchNorm, TrainingRunningStatsAndInference) { check_batch_norm_training(onednn()); }

TEST(DnnlBatchNorm, MomentumAndEps) { check_batch_norm_momentum_and_eps(onednn()); }

TEST(DnnlBatchNorm, AfterFc) { check_batch_norm_after_fc(onednn(), 24, 4); }

TEST(DnnlEltwise, Relu) { check_relu(onednn()); }

TEST(DnnlEltwise, Relu6) { check_relu6(onednn()); }

class DnnlPool : public ::testing::TestWithParam<PoolCase> {};

TEST_P(DnnlPool, MatchesReference) { check_pool(onednn(), GetParam()); }

INSTANTIATE_TEST_SUITE_P(Variants, DnnlPool, ::testing::ValuesIn(pool_cases({})),
                         [](const ::testing::TestParamInfo<PoolCase>& p) { return p.param.name; });

// ---------------------------------------------------------------------------------------------
// Concat, fc, dropout (concat_graph: backend_compare.h)

TEST(DnnlConcat, BlockedChannelCounts) {
  check_graph(concat_graph({16, 32}, false));
  check_graph(concat_graph({16, 32, 16}, true));
}

TEST(DnnlConcat, OddChannelCounts) {
  check_graph(concat_graph({0, 5}, true));  // the input's 3 channels and 5
  check_graph(concat_graph({3, 5}, false));
  check_graph(concat_graph({16, 5, 32}, true));
}

TEST(DnnlConcat, SameInputTwice) { check_concat_same_input_twice(onednn()); }

TEST(DnnlFc, From4dBlocked) { check_fc_after_conv(onednn()); }

TEST(DnnlFc, FromInputAndChained) { check_fc_from_input_and_chained(onednn(), 2); }

TEST(DnnlDropout, MasksEqualReference) { check_dropout_masks(onednn()); }

TEST(DnnlDropout, AfterBlockedConvBeforeFc) { check_dropout_after_conv_before_fc(onednn()); }

// ---------------------------------------------------------------------------------------------
// Whole graphs (lenet_like, inception_like and the cases: backend_compare.h)

TEST(DnnlGraph, LenetLike) { check_graph(lenet_like(), {.batch = 3}); }

TEST(DnnlGraph, InceptionLikeBlock) { check_graph(inception_like(false), {.batch = 2, .tol = 3e-4}); }

TEST(DnnlGraph, TwoOutputs) { check_two_outputs(onednn()); }

// Gradients summed across layouts.
TEST(DnnlGraph, FanOutAcrossLayouts) { check_fan_out(onednn()); }

TEST(DnnlGraph, BatchNormOnInputKeepsInputGradient) { check_batch_norm_on_input(onednn()); }

TEST(DnnlGraph, SecondStepAndRebind) { check_second_step_and_rebind(onednn()); }

// ---------------------------------------------------------------------------------------------
// Weight gradients on a side thread (Network::set_weight_grad_thread)

NetworkFactory onednn_beside() {
  return [](const Graph& g, int batch) {
    auto net = make_network("onednn", g, batch);
    EXPECT_TRUE(net->set_weight_grad_thread(true));
    return net;
  };
}

TEST(DnnlWeightGradThread, GraphsMatchReference) {
  compare_with_reference(onednn_beside(), lenet_like(), {.batch = 3});
  compare_with_reference(onednn_beside(), inception_like(false), {.batch = 2, .tol = 3e-4});
  check_fan_out(onednn_beside());
  check_second_step_and_rebind(onednn_beside());
}

// With one OpenMP thread on either side every primitive computes alike: the results are the
// same bits as without the side thread, at every step.
TEST(DnnlWeightGradThread, SameBitsAsWithout) {
  const int threads = compute_threads();
  set_compute_threads(1);
  const Graph g = build_model("mobilenet_v1", {.classes = 10, .image_size = 32});
  std::vector<float> params, state;
  random_params(g, 5, params, state);
  const std::vector<float> x = random_vector(in_count(g, 4), 6);
  const std::vector<std::vector<float>> dys{random_vector(out_count(g, 0, 4), 7)};
  for (uint64_t seed : {1, 2}) {
    const StepResult here = run_step(onednn(), g, 4, params, state, x, dys, {.training = true, .seed = seed});
    const StepResult beside = run_step(onednn_beside(), g, 4, params, state, x, dys, {.training = true, .seed = seed});
    EXPECT_EQ(here.grads, beside.grads);
    EXPECT_EQ(here.dx, beside.dx);
    EXPECT_EQ(here.state, beside.state);
  }
  set_compute_threads(threads);
}

TEST(DnnlWeightGradThread, ParamGradsCallbackOrderAndFinality) {
  const Graph g = inception_like(true);
  auto net = onednn_beside()(g, 2);
  std::vector<float> params, state, grads(g.param_count, 0.0f);
  random_params(g, 2, params, state);
  net->bind(params.data(), grads.data(), state.data());
  check_param_grads_callback(*net, 2, [&](size_t offset, size_t n) {
    return std::vector<float>(grads.begin() + long(offset), grads.begin() + long(offset + n));
  });
}

TEST(DnnlWeightGradThread, OffAndInferenceOnly) {
  auto net = make_network("onednn", lenet_like(), 2);
  EXPECT_TRUE(net->set_weight_grad_thread(true));
  EXPECT_TRUE(net->set_weight_grad_thread(false));
  auto infer = make_network("onednn", lenet_like(), 2, {.inference_only = true});
  EXPECT_FALSE(infer->set_weight_grad_thread(true));  // no backward to share
  auto ref = make_network("reference", lenet_like(), 2);
  EXPECT_FALSE(ref->set_weight_grad_thread(true));
  EXPECT_TRUE(ref->set_weight_grad_thread(false));
}

// ---------------------------------------------------------------------------------------------
// Interface behaviour

// The network bound to host buffers, initialised as the comparison's.
struct HostBuffers {
  HostBuffers(const Graph& g, uint32_t seed) : grads(g.param_count, 0.0f) { random_params(g, seed, params, state); }
  void bind(Network& net) { net.bind(params.data(), grads.data(), state.data()); }
  GradReader reader() const {
    return [this](size_t offset, size_t n) {
      return std::vector<float>(grads.begin() + long(offset), grads.begin() + long(offset + n));
    };
  }
  std::vector<float> params, grads, state;
};

TEST(DnnlNetwork, ParamGradsCallbackOrderAndFinality) {
  const Graph g = inception_like(true);
  auto net = make_network("onednn", g, 2);
  EXPECT_EQ(net->backend(), "onednn");
  HostBuffers b(g, 2);
  b.bind(*net);
  check_param_grads_callback(*net, 2, b.reader());
}

TEST(DnnlNetwork, OutputGradientsResetAfterBackward) {
  const Graph g = lenet_like();
  auto net = make_network("onednn", g, 2);
  HostBuffers b(g, 2);
  b.bind(*net);
  check_output_grads_reset(*net, 2, b.reader());
}

TEST(DnnlNetwork, ForwardSanityByHand) { check_conv_by_hand(onednn()); }

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
