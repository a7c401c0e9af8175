// The CUDA backend ("cudnn") against the reference backend, as the oneDNN backend is tested
// (backend_compare.h): per op and variant, then whole graphs and the zoo's lenet and
// mobilenet_v1 at small sizes, on random inputs, parameters and output gradients. Outputs, the
// input gradient, every parameter gradient and the batch-norm state must agree within `tol`
// relative to each tensor's largest magnitude: 1e-4 per op (2e-4 through batch norm), with
// TF32 off (the backend's default: CUDNN_FMA_MATH, CUBLAS_DEFAULT_MATH; with TF32 errors are
// ~1e-3). Dropout masks must be equal bit for bit. Whole models are compared normwise (see
// DnnlZoo in dnnl_layers_test.cc for why).
//
// Without a usable CUDA device every test but one skips, with the reason; that one checks
// that make_network("cudnn") then says why it cannot run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend_compare.h"
#include "cuda/device.h"
#include "cuda/memory.h"
#include "models/backends.h"
#include "models/device_memory.h"
#include "models/graph.h"
#include "models/network.h"
#include "models/zoo.h"

namespace ringbench::models {
namespace {

using namespace backend_test;
using cuda::DeviceArray;

// ---------------------------------------------------------------------------------------------
// Helpers

// The cudnn network behind host buffers, so the shared comparison (which owns host vectors) can
// drive it: bind() copies parameters, gradients and state into device buffers of its own and
// binds those; forward() uploads parameters and state first and downloads the state after;
// backward() downloads the gradients after.
class HostStaged final : public Network {
 public:
  explicit HostStaged(std::unique_ptr<Network> net)
      : net_(std::move(net)),
        params_(net_->graph().param_count, "test parameters"),
        grads_(net_->graph().param_count, "test gradients"),
        state_(net_->graph().state_count, "test state") {}

  const Graph& graph() const override { return net_->graph(); }
  int batch() const override { return net_->batch(); }
  std::string backend() const override { return net_->backend(); }
  std::string describe() const override { return net_->describe(); }

  void bind(float* params, float* grads, float* state) override {
    host_params_ = params;
    host_grads_ = grads;
    host_state_ = state;
    upload(params_, params);
    upload(grads_, grads);  // NaN from run_step: backward must overwrite every gradient
    upload(state_, state);
    net_->bind(params ? params_.data() : nullptr, grads ? grads_.data() : nullptr, state ? state_.data() : nullptr);
  }
  void set_input(const float* x) override { net_->set_input(x); }
  void forward(const ForwardArgs& args) override {
    upload(params_, host_params_);
    upload(state_, host_state_);
    net_->forward(args);
    download(host_state_, state_);
  }
  void get_output(size_t i, float* y) override { net_->get_output(i, y); }
  void set_output_grad(size_t i, const float* dy) override { net_->set_output_grad(i, dy); }
  void backward(const std::function<void(int node)>& on_param_grads) override {
    net_->backward(on_param_grads);
    download(host_grads_, grads_);
  }
  void get_input_grad(float* dx) override { net_->get_input_grad(dx); }

 private:
  cudaStream_t compute_stream() const { return static_cast<cudaStream_t>(net_->stream()); }
  void upload(const DeviceArray<float>& d, const float* h) const {
    if (!h || d.size() == 0) return;
    RB_CUDA(cudaMemcpyAsync(d.data(), h, d.bytes(), cudaMemcpyHostToDevice, compute_stream()));
    RB_CUDA(cudaStreamSynchronize(compute_stream()));
  }
  void download(float* h, const DeviceArray<float>& d) const {
    if (!h || d.size() == 0) return;
    RB_CUDA(cudaMemcpyAsync(h, d.data(), d.bytes(), cudaMemcpyDeviceToHost, compute_stream()));
    RB_CUDA(cudaStreamSynchronize(compute_stream()));
  }

  std::unique_ptr<Network> net_;
  DeviceArray<float> params_, grads_, state_;
  float* host_params_ = nullptr;
  float* host_grads_ = nullptr;
  float* host_state_ = nullptr;
};

NetworkFactory cudnn() {
  return [](const Graph& g, int batch) -> std::unique_ptr<Network> {
    return std::make_unique<HostStaged>(make_network("cudnn", g, batch));
  };
}

void check_graph(const Graph& g, const CheckOptions& o = {}) { compare_with_reference(cudnn(), g, o); }

// Device copies of host vectors, for the tests that drive the device network directly.
DeviceArray<float> to_device(const std::vector<float>& v, const char* what) {
  DeviceArray<float> d(v.size(), what);
  if (!v.empty()) RB_CUDA(cudaMemcpy(d.data(), v.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

std::vector<float> to_host(const float* d, size_t n, cudaStream_t stream) {
  std::vector<float> v(n);
  if (n) RB_CUDA(cudaMemcpyAsync(v.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  RB_CUDA(cudaStreamSynchronize(stream));
  return v;
}

// ---------------------------------------------------------------------------------------------
// Convolution

struct ConvCase {
  std::string name;
  Dims in;
  int pre;  // channels of a conv before (0: on the input itself)
  ConvSpec spec;
};

class CudnnConv : public ::testing::TestWithParam<ConvCase> {};

TEST_P(CudnnConv, MatchesReference) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const ConvCase& c = GetParam();
  check_graph(single_op(c.in, c.pre, [&](Graph& g, int x) { return g.conv(x, "conv", c.spec); }));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CudnnConv,
    ::testing::Values(
        ConvCase{"plain3x3_on_input", {3, 9, 9}, 0, conv(8, 3, 3, 1, Pads::same(1))},
        ConvCase{"bias_on_input", {3, 9, 9}, 0, conv(16, 3, 3, 1, Pads::same(1), 1, true)},
        ConvCase{"after_conv", {3, 8, 8}, 16, conv(32, 3, 3, 1, Pads::same(1))},
        ConvCase{"after_conv_bias", {3, 8, 8}, 16, conv(16, 3, 3, 1, Pads::same(1), 1, true)},
        ConvCase{"pointwise", {3, 7, 7}, 32, conv(16, 1, 1)},
        ConvCase{"grouped", {3, 8, 8}, 32, conv(32, 3, 3, 1, Pads::same(1), 4)},
        ConvCase{"grouped_odd", {6, 7, 7}, 0, conv(9, 3, 3, 1, Pads::same(1), 3)},
        ConvCase{"depthwise", {3, 9, 9}, 32, conv(32, 3, 3, 1, Pads::same(1), 32)},
        ConvCase{"depthwise_stride2", {3, 9, 9}, 16, conv(16, 3, 3, 2, Pads::same(1), 16)},
        ConvCase{"depthwise_on_input", {5, 9, 9}, 0, conv(5, 3, 3, 1, Pads::same(1), 5)},
        ConvCase{"depthwise_tf_same_stride2", {3, 8, 8}, 16, conv(16, 3, 3, 2, {0, 1, 0, 1}, 16)},  // explicit pad
        ConvCase{"stride2_valid", {3, 11, 11}, 16, conv(32, 3, 3, 2)},
        ConvCase{"stride2_on_input", {3, 11, 11}, 0, conv(32, 3, 3, 2)},
        ConvCase{"k1x7", {3, 9, 9}, 16, conv(16, 1, 7, 1, {0, 0, 3, 3})},
        ConvCase{"k7x1", {3, 9, 9}, 16, conv(16, 7, 1, 1, {3, 3, 0, 0})},
        ConvCase{"asymmetric_pads", {3, 10, 9}, 16, conv(16, 3, 3, 2, {0, 2, 1, 0}, 1, true)},
        ConvCase{"asymmetric_pads_5x5", {4, 8, 8}, 0, conv(8, 5, 5, 1, {1, 3, 4, 0})},
        ConvCase{"asymmetric_pads_grouped", {4, 8, 7}, 8, conv(8, 3, 3, 2, {1, 0, 2, 1}, 2)},
        ConvCase{"odd_channels", {3, 6, 6}, 5, conv(7, 3, 3, 1, Pads::same(1), 1, true)},
        ConvCase{"kernel_eq_input", {3, 5, 5}, 16, conv(16, 5, 5)}),
    [](const ::testing::TestParamInfo<ConvCase>& p) { return p.param.name; });

// ---------------------------------------------------------------------------------------------
// Batch norm, relu, relu6, pooling

TEST(CudnnBatchNorm, TrainingRunningStatsAndInference) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  for (int pre : {0, 16, 5}) {
    SCOPED_TRACE("pre-conv channels " + std::to_string(pre));
    check_graph(single_op({3, 6, 5}, pre, [](Graph& g, int x) { return g.batch_norm(x, "bn", {1e-3f, 0.1f}); }, false),
                {.batch = 3, .tol = 2e-4});
  }
}

TEST(CudnnBatchNorm, MomentumAndEps) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  check_graph(single_op({3, 4, 4}, 32, [](Graph& g, int x) { return g.batch_norm(x, "bn", {1e-5f, 0.9f}); }, false),
              {.batch = 2, .tol = 2e-4});
}

TEST(CudnnBatchNorm, AfterFc) {  // per-channel statistics over the batch only (h = w = 1)
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  check_graph(single_op({3, 4, 4}, 0, [](Graph& g, int x) { return g.batch_norm(g.fc(x, "fc", {24, false}), "bn"); }),
              {.batch = 4, .tol = 2e-4});
}

TEST(CudnnBatchNorm, OneValuePerChannel) {  // batch 1 after an fc: running variance from the biased one (0)
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  check_graph(single_op({3, 4, 4}, 0, [](Graph& g, int x) { return g.batch_norm(g.fc(x, "fc", {6, false}), "bn"); }),
              {.batch = 1, .tol = 2e-4});
}

TEST(CudnnEltwise, Relu) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  for (int pre : {0, 16})
    check_graph(single_op({3, 5, 5}, pre, [](Graph& g, int x) { return g.relu(x, "relu"); }));
}

TEST(CudnnEltwise, Relu6) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  // Inputs in [-8, 8] so that both ends of the clip are hit, directly and after a conv.
  for (int pre : {0, 16})
    check_graph(single_op({3, 5, 5}, pre, [](Graph& g, int x) { return g.relu6(x, "relu6"); }),
                {.seed = 3, .input_scale = 8});
}

struct PoolCase {
  std::string name;
  bool max;
  int pre;
  PoolSpec spec;
};

class CudnnPool : public ::testing::TestWithParam<PoolCase> {};

TEST_P(CudnnPool, MatchesReference) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const PoolCase& c = GetParam();
  check_graph(single_op({3, 9, 9}, c.pre, [&](Graph& g, int x) {
    return c.max ? g.max_pool(x, "pool", c.spec) : g.avg_pool(x, "pool", c.spec);
  }));
}

// Average pooling with symmetric pads runs through cuDNN, with asymmetric ones through our kernel.
INSTANTIATE_TEST_SUITE_P(
    Variants, CudnnPool,
    ::testing::Values(PoolCase{"max2x2", true, 16, pool(2, 2)}, PoolCase{"max3x3s2", true, 32, pool(3, 2)},
                      PoolCase{"max3x3s1_pad", true, 16, pool(3, 1, Pads::same(1))},
                      PoolCase{"max_asym_pad", true, 16, pool(3, 2, {0, 1, 1, 2})},
                      PoolCase{"max_on_input", true, 0, pool(3, 2, Pads::same(1))},
                      PoolCase{"avg_include", false, 16, pool(3, 1, Pads::same(1))},
                      PoolCase{"avg_exclude", false, 16, pool(3, 1, Pads::same(1), true)},
                      PoolCase{"avg_include_s2", false, 16, pool(3, 2, Pads::same(1))},
                      PoolCase{"avg_exclude_s2", false, 16, pool(3, 2, Pads::same(1), true)},
                      PoolCase{"avg_include_s2_asym", false, 16, pool(3, 2, {1, 0, 2, 1})},
                      PoolCase{"avg_exclude_s2_asym", false, 16, pool(3, 2, {1, 0, 2, 1}, true)},
                      PoolCase{"avg_global", false, 32, pool(9, 1)},
                      PoolCase{"avg_exclude_on_input", false, 0, pool(3, 1, Pads::same(1), true)},
                      PoolCase{"avg_odd_channels", false, 5, pool(2, 2, {1, 0, 1, 0}, true)}),
    [](const ::testing::TestParamInfo<PoolCase>& p) { return p.param.name; });

// After a ReLU whole windows are 0: the gradient goes to the first tap, as in the reference.
TEST(CudnnPool, MaxTiesAfterRelu) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  for (const PoolSpec& s : {pool(2, 2), pool(3, 1, Pads::same(1)), pool(3, 2)})
    check_graph(single_op({3, 8, 8}, 0, [&](Graph& g, int x) { return g.max_pool(g.relu(x, "relu"), "pool", s); }),
                {.batch = 3});
}

// ---------------------------------------------------------------------------------------------
// Concat, fc, dropout

TEST(CudnnConcat, ChannelCounts) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  check_graph(concat_graph({16, 32}, false));
  check_graph(concat_graph({16, 32, 16}, true));
  check_graph(concat_graph({0, 5}, true));  // the input's 3 channels and 5
  check_graph(concat_graph({3, 5}, false));
}

TEST(CudnnConcat, TwoConsumersOfOneNode) {  // `a` twice in one concat, `x` in it and before `a`
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  Graph g;
  const int x = g.input({3, 5, 5});
  const int a = g.conv(x, "a", conv(16, 3, 3, 1, Pads::same(1)));
  g.add_output(g.relu(g.concat({a, a, x}, "concat"), "relu"));
  check_graph(g);
}

TEST(CudnnFc, AfterConvWithAndWithoutBias) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  check_graph(single_op({3, 5, 4}, 16, [](Graph& g, int x) { return g.fc(x, "fc", {10, true}); }));
  check_graph(single_op({3, 5, 4}, 5, [](Graph& g, int x) { return g.fc(x, "fc", {7, false}); }));
}

TEST(CudnnFc, FromInputAndChained) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  check_graph(single_op({3, 5, 4}, 0, [](Graph& g, int x) {
    return g.fc(g.relu(g.fc(x, "fc0", {33, true}), "relu"), "fc1", {10, true});
  }), {.batch = 5});
}

TEST(CudnnDropout, MasksEqualReference) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const Graph g = single_op({2, 6, 5}, 0, [](Graph& gr, int x) { return gr.dropout(x, "drop", 0.4f); });
  const int batch = 3;
  std::vector<float> params, state;
  random_params(g, 1, params, state);
  const std::vector<float> x = random_vector(in_count(g, batch), 5, 0.5f, 1.5f);  // never 0
  const std::vector<std::vector<float>> dys{random_vector(out_count(g, 0, batch), 6)};
  for (uint64_t step : {0, 1, 7}) {
    const ForwardArgs args{.training = true, .seed = 42, .step = step, .sample_offset = int64_t(step) * batch};
    const StepResult want = run_step("reference", g, batch, params, state, x, dys, args);
    const StepResult got = run_step(cudnn(), g, batch, params, state, x, dys, args);
    EXPECT_EQ(got.outputs[0], want.outputs[0]) << "step " << step;
    EXPECT_EQ(got.dx, want.dx) << "step " << step;
    const auto dropped = std::count(got.outputs[0].begin(), got.outputs[0].end(), 0.0f);
    EXPECT_GT(dropped, 0);
    EXPECT_LT(dropped, int64_t(got.outputs[0].size()));
  }
  // Inference: identity.
  const StepResult inf = run_step(cudnn(), g, batch, params, state, x, dys, {.training = false});
  EXPECT_EQ(inf.outputs[0], x);
  EXPECT_EQ(inf.dx, dys[0]);
}

TEST(CudnnDropout, AfterConvBeforeFc) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  check_graph(
      single_op({3, 4, 4}, 16, [](Graph& g, int x) { return g.fc(g.dropout(x, "drop", 0.5f), "fc", {6, true}); }));
}

// ---------------------------------------------------------------------------------------------
// Whole graphs (backend_compare.h)

TEST(CudnnGraph, LenetLike) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  check_graph(lenet_like(), {.batch = 3});
}

TEST(CudnnGraph, InceptionLikeBlock) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  check_graph(inception_like(false), {.batch = 2, .tol = 3e-4});
}

TEST(CudnnGraph, TwoOutputs) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
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
    const StepResult got = run_step(cudnn(), g, 2, params, state, x, dys, args);
    expect_same_step(g, got, want, 3e-4, "only output " + std::to_string(only));
  }
}

// A node feeding consumers of every kind, whose gradients must be summed; the input feeds two.
TEST(CudnnGraph, FanOut) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  Graph g;
  const int x = g.input({3, 7, 7});
  const int a = g.conv(x, "a", conv(16, 3, 3, 1, Pads::same(1), 1, true));
  const int r = g.relu(a, "r");
  const int p = g.max_pool(a, "p", pool(3, 1, Pads::same(1)));
  const int c = g.conv(a, "c", conv(5, 3, 3, 1, Pads::same(1)));
  const int d = g.conv(x, "d", conv(3, 1, 1));
  const int cat = g.concat({r, p, c, d}, "cat");
  g.add_output(g.fc(g.dropout(cat, "drop", 0.3f), "fc", {4, true}));
  g.add_output(g.relu(a, "side"), 0.5f);  // a is also an output's producer
  check_graph(g, {.batch = 2});
}

TEST(CudnnGraph, OutputThatIsAlsoConsumed) {  // the output's gradient plus its consumer's
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  Graph g;
  const int x = g.input({3, 5, 5});
  const int a = g.conv(x, "a", conv(8, 3, 3, 1, Pads::same(1), 1, true));
  g.add_output(a);
  g.add_output(g.fc(g.relu(a, "r"), "fc", {5, true}));
  check_graph(g, {.batch = 2});
}

TEST(CudnnGraph, BatchNormOnInputKeepsInputGradient) {  // no deferral of the input gradient
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  Graph g;
  const int x = g.input({3, 5, 5});
  const int bn = g.batch_norm(x, "bn");
  const int c = g.conv(x, "c", conv(3, 3, 3, 1, Pads::same(1)));
  g.add_output(g.concat({bn, c}, "cat"));
  check_graph(g, {.batch = 3, .tol = 2e-4});
}

TEST(CudnnGraph, SecondStepAndRebind) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  // Two steps on one network: running statistics accumulate, gradients are overwritten, and a
  // rebind to other buffers takes effect.
  const Graph g = inception_like(false);
  const int batch = 2;
  std::vector<float> params, state;
  random_params(g, 4, params, state);
  std::vector<std::unique_ptr<Network>> nets;
  std::vector<std::vector<float>> p(2, params), s(2, state), gr(2, std::vector<float>(g.param_count));
  nets.push_back(make_network("reference", g, batch));
  nets.push_back(cudnn()(g, batch));
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

// ---------------------------------------------------------------------------------------------
// The zoo's models, one step at small sizes, compared normwise: errors in deep graphs come from
// float rounding flipping ReLU and max-pool decisions and batch norm spreading them over a
// channel (see DnnlZoo), not from wrong indexing, which gives errors of order 1.

TEST(CudnnZoo, Lenet) {  // no batch norm: only rounding, and a rare ReLU flip
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const Graph g = build_model("lenet", {});
  check_graph(g, {.batch = 4, .tol = 1e-4, .normwise = true, .grad_tol = 1e-3});
}

TEST(CudnnZoo, MobilenetV1) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const Graph g = build_model("mobilenet_v1", {.classes = 10, .image_size = 64});
  check_graph(g, {.batch = 4, .tol = 1e-4, .normwise = true, .grad_tol = 5e-2});
}

// ---------------------------------------------------------------------------------------------
// Interface behaviour, on the device network itself

// A graph's device buffers, initialised like the comparison's host ones.
struct DeviceBuffers {
  DeviceBuffers(const Graph& g, uint32_t seed) {
    std::vector<float> p, s;
    random_params(g, seed, p, s);
    params = to_device(p, "test parameters");
    grads = to_device(std::vector<float>(g.param_count, 0.0f), "test gradients");
    state = to_device(s, "test state");
  }
  void bind(Network& net) { net.bind(params.data(), grads.data(), state.size() ? state.data() : nullptr); }
  DeviceArray<float> params, grads, state;
};

TEST(CudnnNetwork, OnDeviceStreamAndDescribe) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const Graph g = inception_like(false);
  auto net = make_network("cudnn", g, 2);
  EXPECT_EQ(net->backend(), "cudnn");
  EXPECT_TRUE(net->on_device());
  EXPECT_NE(net->stream(), nullptr);
  const std::string d = net->describe();
  EXPECT_NE(d.find("conv 3x3/2"), std::string::npos) << d;
  EXPECT_NE(d.find("fwd="), std::string::npos) << d;
  EXPECT_NE(d.find("bwd_filter="), std::string::npos) << d;
  EXPECT_NE(d.find("CUDNN_FMA_MATH"), std::string::npos) << d;  // no TF32 unless asked for
  EXPECT_NE(d.find("bn cudnn"), std::string::npos) << d;
}

TEST(CudnnNetwork, Errors) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const Graph g = lenet_like();
  auto net = make_network("cudnn", g, 2);
  EXPECT_THROW(net->forward({}), std::logic_error);  // not bound
  EXPECT_THROW(net->bind(nullptr, nullptr, nullptr), std::invalid_argument);
  std::vector<float> host(g.param_count);
  EXPECT_THROW(net->bind(host.data(), host.data(), nullptr), std::invalid_argument);  // host memory
  EXPECT_THROW(make_network("cudnn", g, 0), std::invalid_argument);
}

TEST(CudnnNetwork, ParamGradsCallbackOrderAndFinality) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const Graph g = inception_like(true);
  const int batch = 2;
  auto net = make_network("cudnn", g, batch);
  DeviceBuffers b(g, 2);
  b.bind(*net);
  const auto stream = static_cast<cudaStream_t>(net->stream());
  const std::vector<float> x = random_vector(in_count(g, batch), 3);
  net->set_input(x.data());
  net->forward({});
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const std::vector<float> dy = random_vector(out_count(g, i, batch), 4 + uint32_t(i));
    net->set_output_grad(i, dy.data());
  }
  std::vector<int> order, traced;
  std::vector<std::vector<float>> snapshot;
  net->set_trace([&](int node, Phase phase, auto begin, auto end) {
    EXPECT_LE(begin, end);
    if (phase == Phase::backward) traced.push_back(node);
  });
  net->backward([&](int node) {
    order.push_back(node);
    // What is queued so far must be the node's final gradient (the trainer records an event here).
    for (int k : g.nodes[node].params) {
      const ParamTensor& t = g.params[k];
      snapshot.push_back(to_host(b.grads.data() + t.offset, t.numel, stream));
    }
  });
  std::vector<int> expected;
  for (int i = int(g.nodes.size()) - 1; i >= 1; --i)
    if (!g.nodes[i].params.empty()) expected.push_back(i);
  EXPECT_EQ(order, expected);
  const std::vector<float> grads = to_host(b.grads.data(), g.param_count, stream);
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

TEST(CudnnNetwork, OutputGradientsResetAfterBackward) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const Graph g = lenet_like();
  const int batch = 2;
  auto net = make_network("cudnn", g, batch);
  DeviceBuffers b(g, 2);
  b.bind(*net);
  const auto stream = static_cast<cudaStream_t>(net->stream());
  const std::vector<float> x = random_vector(in_count(g, batch), 3);
  const std::vector<float> dy = random_vector(out_count(g, 0, batch), 4);
  net->set_input(x.data());
  net->forward({});
  net->set_output_grad(0, dy.data());
  net->backward();
  std::vector<float> grads = to_host(b.grads.data(), g.param_count, stream);
  EXPECT_TRUE(std::any_of(grads.begin(), grads.end(), [](float v) { return v != 0; }));
  net->forward({});
  net->backward();  // no gradient set: all zero
  grads = to_host(b.grads.data(), g.param_count, stream);
  EXPECT_TRUE(std::all_of(grads.begin(), grads.end(), [](float v) { return v == 0; }));
}

TEST(CudnnNetwork, ForwardSanityByHand) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  // 1 input channel, 2x2 image, conv 3x3 pad 1 with all-one weights and bias 0.5: each output
  // is the sum of the input's taps in the window plus 0.5.
  Graph g;
  const int x = g.input({1, 2, 2});
  g.add_output(g.conv(x, "c", conv(1, 3, 3, 1, Pads::same(1), 1, true)));
  std::vector<float> params(g.param_count, 1.0f), grads(g.param_count);
  params[9] = 0.5f;
  auto net = cudnn()(g, 1);
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

// Counts checkpoints: one before each node's forward and each node's backward.
class CountingGate final : public DeviceGate {
 public:
  void enter() override {}
  void checkpoint() override { ++checkpoints; }
  void leave() override {}
  Usage usage() const override { return {}; }
  int checkpoints = 0;
};

TEST(CudnnNetwork, GateCheckpointsEveryLayer) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const Graph g = lenet_like();
  auto net = make_network("cudnn", g, 2);
  DeviceBuffers b(g, 5);
  b.bind(*net);
  CountingGate gate;
  net->set_gate(&gate);
  const std::vector<float> x = random_vector(in_count(g, 2), 3);
  net->set_input(x.data());
  net->forward({});
  EXPECT_EQ(gate.checkpoints, int(g.nodes.size()) - 1);
  net->backward();
  EXPECT_EQ(gate.checkpoints, 2 * (int(g.nodes.size()) - 1));
}

// Every buffer the backend keeps (activations, gradients, workspace) counts against the emulated
// framebuffer: under a cap too small for them, construction fails like cudaMalloc on a vGPU.
TEST(CudnnNetwork, DeviceMemoryIsCounted) {
  if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  const Graph g = build_model("mobilenet_v1", {.classes = 10, .image_size = 64});
  DeviceMemory& dm = DeviceMemory::instance();
  const size_t before = dm.in_use();
  {
    auto net = make_network("cudnn", g, 4);
    // At least every node's activation and gradient.
    size_t activations = 0;
    for (const Node& n : g.nodes) activations += 2 * 4 * size_t(n.out.numel()) * sizeof(float);
    EXPECT_GE(dm.in_use() - before, activations);
  }
  EXPECT_EQ(dm.in_use(), before);
  dm.set_cap(before + (size_t(1) << 20));
  EXPECT_THROW(make_network("cudnn", g, 4), DeviceOutOfMemory);
  dm.set_cap(0);
  EXPECT_EQ(dm.in_use(), before);
}

// ---------------------------------------------------------------------------------------------
// Availability: runs with and without a device.

TEST(CudnnBackend, ListedExactlyWhenUsable) {
  const std::vector<std::string> b = available_backends();
  const bool listed = std::find(b.begin(), b.end(), "cudnn") != b.end();
  EXPECT_EQ(listed, cuda::unavailable_reason().empty());
  EXPECT_NE(b.front(), "cudnn");  // `--backend auto` stays on the CPU
}

TEST(CudnnBackend, UnavailableSaysWhy) {
  const std::string why = cuda::unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "a CUDA device is usable here";
  try {
    make_network("cudnn", lenet_like(), 2);
    ADD_FAILURE() << "make_network(\"cudnn\") did not throw without a device";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ringbench::models
