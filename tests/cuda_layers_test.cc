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
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend_compare.h"
#include "collectives/reduce.h"
#include "cuda/device.h"
#include "cuda/memory.h"
#include "models/backends.h"
#include "models/cuda/layer_kernels.h"
#include "base/device_memory.h"
#include "models/graph.h"
#include "models/network.h"
#include "models/zoo.h"

namespace ringbench::models {
namespace {

using namespace backend_test;
using cuda::DeviceArray;

// ---------------------------------------------------------------------------------------------
// Helpers

// The tests that need a usable CUDA device: each skips, with the reason, where there is none.
class NeedsCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  }
};
class CudnnBatchNorm : public NeedsCuda {};
class CudnnEltwise : public NeedsCuda {};
class CudnnConcat : public NeedsCuda {};
class CudnnFc : public NeedsCuda {};
class CudnnDropout : public NeedsCuda {};
class CudnnGraph : public NeedsCuda {};
class CudnnZoo : public NeedsCuda {};
class CudnnNetwork : public NeedsCuda {};

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

// measure: the convolution algorithms timed at setup (train's default), else cuDNN's heuristics.
NetworkFactory cudnn(bool measure = false) {
  return [measure](const Graph& g, int batch) -> std::unique_ptr<Network> {
    return std::make_unique<HostStaged>(make_network("cudnn", g, batch, {.measure_conv_algos = measure}));
  };
}

void check_graph(const Graph& g, const CheckOptions& o = {}) { compare_with_reference(cudnn(), g, o); }

// Device copies of host vectors, for the tests that drive the device network directly.
DeviceArray<float> to_device(const std::vector<float>& v, const char* what) {
  DeviceArray<float> d(v.size(), what);
  if (!v.empty()) {
    RB_CUDA(cudaMemcpy(d.data(), v.data(), d.bytes(), cudaMemcpyHostToDevice));
    // A pageable copy may return before it lands, and the network's stream does not wait
    // for the legacy default stream.
    RB_CUDA(cudaStreamSynchronize(0));
  }
  return d;
}

std::vector<float> to_host(const float* d, size_t n, cudaStream_t stream) {
  std::vector<float> v(n);
  if (n) RB_CUDA(cudaMemcpyAsync(v.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  RB_CUDA(cudaStreamSynchronize(stream));
  return v;
}

// ---------------------------------------------------------------------------------------------
// Convolution (the cases: backend_compare.h)

class CudnnConv : public NeedsCuda, public ::testing::WithParamInterface<ConvCase> {};

TEST_P(CudnnConv, MatchesReference) {
  check_conv(cudnn(), GetParam());
}

// Timed choice may pick cuDNN's FFT or Winograd algorithms, fp32 but less exact than a GEMM:
// on an H200 under compute-sanitizer (other timings) WINOGRAD_NONFUSED or FFT on kernel_eq_input
// was 2.4e-4 of the output's scale off the reference. PyTorch's cudnn.benchmark allows them too.
TEST_P(CudnnConv, MatchesReferenceWithMeasuredAlgorithms) {
  check_conv(cudnn(true), GetParam(), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CudnnConv,
    ::testing::ValuesIn(conv_cases({
        ConvCase{"after_conv", {3, 8, 8}, 16, conv(32, 3, 3, 1, Pads::same(1))},
        ConvCase{"after_conv_bias", {3, 8, 8}, 16, conv(16, 3, 3, 1, Pads::same(1), 1, true)},
        ConvCase{"depthwise_tf_same_stride2", {3, 8, 8}, 16, conv(16, 3, 3, 2, {0, 1, 0, 1}, 16)},  // explicit pad
        ConvCase{"asymmetric_pads_grouped", {4, 8, 7}, 8, conv(8, 3, 3, 2, {1, 0, 2, 1}, 2)},
    })),
    [](const ::testing::TestParamInfo<ConvCase>& p) { return p.param.name; });

// ---------------------------------------------------------------------------------------------
// Batch norm, relu, relu6, pooling

TEST_F(CudnnBatchNorm, TrainingRunningStatsAndInference) {
  check_batch_norm_training(cudnn());
}

TEST_F(CudnnBatchNorm, MomentumAndEps) {
  check_batch_norm_momentum_and_eps(cudnn());
}

TEST_F(CudnnBatchNorm, AfterFc) {
  check_batch_norm_after_fc(cudnn(), 24, 4);
}

TEST_F(CudnnBatchNorm, OneValuePerChannel) {  // batch 1 after an fc: running variance from the biased one (0)
  check_batch_norm_after_fc(cudnn(), 6, 1);
}

// Batch norm fused with the ReLU or ReLU6 that alone reads it (bn_act_kernels.cu, the default)
// and cuDNN's batch norm followed by the separate activation, both against the reference: a
// batch norm read by a ReLU6, one by a ReLU, one read twice and one that is an output (neither
// fused); training, then inference.
Graph bn_activation_graph() {
  Graph g;
  const int x = g.input({3, 9, 8});
  const int a = g.relu6(g.batch_norm(g.conv(x, "c1", conv(8, 3, 3, 1, Pads::same(1))), "bn1"), "act1");
  const int b = g.relu(g.batch_norm(g.conv(a, "c2", conv(8, 1, 1)), "bn2"), "act2");
  const int twice = g.batch_norm(g.conv(b, "c3", conv(8, 1, 1)), "bn3");
  const int cat = g.concat({g.relu(twice, "act3"), twice}, "cat");
  g.add_output(g.batch_norm(g.conv(cat, "c4", conv(6, 1, 1)), "bn4"));
  return g;
}

TEST_F(CudnnBatchNorm, FusedWithItsActivationAndNot) {
  const Graph g = bn_activation_graph();
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fuse ? "fused" : "unfused");
    const NetworkFactory make = [fuse](const Graph& graph, int batch) -> std::unique_ptr<Network> {
      return std::make_unique<HostStaged>(make_cudnn_network(graph, batch, {.fuse_bn_activation = fuse}));
    };
    compare_with_reference(make, g, {.batch = 3, .tol = 2e-4});
    const std::string d = make(g, 3)->describe();
    EXPECT_EQ(d.find("bn+relu6 fused kernel x1") != std::string::npos, fuse) << d;
    EXPECT_EQ(d.find("bn+relu fused kernel x1") != std::string::npos, fuse) << d;
    EXPECT_NE(d.find(fuse ? "bn cudnnBatchNormalization* spatial x2" : "bn cudnnBatchNormalization* spatial x4"),
              std::string::npos) << d;
  }
}

TEST_F(CudnnEltwise, Relu) {
  check_relu(cudnn());
}

TEST_F(CudnnEltwise, Relu6) {
  check_relu6(cudnn());
}

class CudnnPool : public NeedsCuda, public ::testing::WithParamInterface<PoolCase> {};

TEST_P(CudnnPool, MatchesReference) {
  check_pool(cudnn(), GetParam());
}

// Average pooling with symmetric pads runs through cuDNN, with asymmetric ones through our kernel.
INSTANTIATE_TEST_SUITE_P(Variants, CudnnPool,
                         ::testing::ValuesIn(pool_cases({
                             PoolCase{"avg_include_s2", false, 16, pool(3, 2, Pads::same(1))},
                             PoolCase{"avg_exclude_s2", false, 16, pool(3, 2, Pads::same(1), true)},
                         })),
                         [](const ::testing::TestParamInfo<PoolCase>& p) { return p.param.name; });

// After a ReLU whole windows are 0: the gradient goes to the first tap, as in the reference.
TEST_F(CudnnPool, MaxTiesAfterRelu) {
  for (const PoolSpec& s : {pool(2, 2), pool(3, 1, Pads::same(1)), pool(3, 2)})
    check_graph(single_op({3, 8, 8}, 0, [&](Graph& g, int x) { return g.max_pool(g.relu(x, "relu"), "pool", s); }),
                {.batch = 3});
}

// ---------------------------------------------------------------------------------------------
// Concat, fc, dropout

TEST_F(CudnnConcat, ChannelCounts) {
  check_graph(concat_graph({16, 32}, false));
  check_graph(concat_graph({16, 32, 16}, true));
  check_graph(concat_graph({0, 5}, true));  // the input's 3 channels and 5
  check_graph(concat_graph({3, 5}, false));
}

TEST_F(CudnnConcat, TwoConsumersOfOneNode) {  // `a` twice in one concat, `x` in it and before `a`
  check_concat_same_input_twice(cudnn());
}

TEST_F(CudnnFc, AfterConvWithAndWithoutBias) {
  check_fc_after_conv(cudnn());
}

TEST_F(CudnnFc, FromInputAndChained) {
  check_fc_from_input_and_chained(cudnn(), 5);
}

TEST_F(CudnnDropout, MasksEqualReference) {
  check_dropout_masks(cudnn());
}

TEST_F(CudnnDropout, AfterConvBeforeFc) {
  check_dropout_after_conv_before_fc(cudnn());
}

// ---------------------------------------------------------------------------------------------
// Whole graphs (lenet_like, inception_like and the cases: backend_compare.h)

TEST_F(CudnnGraph, LenetLike) {
  check_graph(lenet_like(), {.batch = 3});
}

TEST_F(CudnnGraph, InceptionLikeBlock) {
  check_graph(inception_like(false), {.batch = 2, .tol = 3e-4});
}

TEST_F(CudnnGraph, InceptionLikeBlockWithMeasuredAlgorithms) {
  compare_with_reference(cudnn(true), inception_like(false), {.batch = 2, .tol = 1e-3});
}

TEST_F(CudnnGraph, TwoOutputs) {
  check_two_outputs(cudnn());
}

TEST_F(CudnnGraph, FanOut) {
  check_fan_out(cudnn());
}

TEST_F(CudnnGraph, OutputThatIsAlsoConsumed) {  // the output's gradient plus its consumer's
  Graph g;
  const int x = g.input({3, 5, 5});
  const int a = g.conv(x, "a", conv(8, 3, 3, 1, Pads::same(1), 1, true));
  g.add_output(a);
  g.add_output(g.fc(g.relu(a, "r"), "fc", {5, true}));
  check_graph(g, {.batch = 2});
}

TEST_F(CudnnGraph, BatchNormOnInputKeepsInputGradient) {
  check_batch_norm_on_input(cudnn());
}

TEST_F(CudnnGraph, SecondStepAndRebind) {
  check_second_step_and_rebind(cudnn());
}

// ---------------------------------------------------------------------------------------------
// The zoo's models, one step at small sizes, compared normwise: errors in deep graphs come from
// float rounding flipping ReLU and max-pool decisions and batch norm spreading them over a
// channel (see DnnlZoo), not from wrong indexing, which gives errors of order 1.

TEST_F(CudnnZoo, Lenet) {  // no batch norm: only rounding, and a rare ReLU flip
  const Graph g = build_model("lenet", {});
  check_graph(g, {.batch = 4, .tol = 1e-4, .normwise = true, .grad_tol = 1e-3});
}

TEST_F(CudnnZoo, MobilenetV1) {
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
  // The gradients as they are once the work queued so far on `net`'s stream is done.
  GradReader reader(const Network& net) const {
    const auto stream = static_cast<cudaStream_t>(net.stream());
    return [this, stream](size_t offset, size_t n) { return to_host(grads.data() + offset, n, stream); };
  }
  DeviceArray<float> params, grads, state;
};

TEST_F(CudnnNetwork, OnDeviceStreamAndDescribe) {
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
  // The fused batch norm + activation is opt-in (RINGBENCH_CUDNN_FUSE_BN=1) until it has run on a GPU.
  EXPECT_EQ(d.find("bn+relu fused kernel"), std::string::npos) << d;
}

TEST_F(CudnnNetwork, Errors) {
  const Graph g = lenet_like();
  auto net = make_network("cudnn", g, 2);
  EXPECT_THROW(net->forward({}), std::logic_error);  // not bound
  EXPECT_THROW(net->bind(nullptr, nullptr, nullptr), std::invalid_argument);
  std::vector<float> host(g.param_count);
  EXPECT_THROW(net->bind(host.data(), host.data(), nullptr), std::invalid_argument);  // host memory
  EXPECT_THROW(make_network("cudnn", g, 0), std::invalid_argument);
}

TEST_F(CudnnNetwork, ParamGradsCallbackOrderAndFinality) {
  const Graph g = inception_like(true);
  auto net = make_network("cudnn", g, 2);
  DeviceBuffers b(g, 2);
  b.bind(*net);
  check_param_grads_callback(*net, 2, b.reader(*net));
}

TEST_F(CudnnNetwork, OutputGradientsResetAfterBackward) {
  const Graph g = lenet_like();
  auto net = make_network("cudnn", g, 2);
  DeviceBuffers b(g, 2);
  b.bind(*net);
  check_output_grads_reset(*net, 2, b.reader(*net));
}

TEST_F(CudnnNetwork, ForwardSanityByHand) {
  check_conv_by_hand(cudnn());
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

TEST_F(CudnnNetwork, GateCheckpointsEveryLayer) {
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
TEST_F(CudnnNetwork, DeviceMemoryIsCounted) {
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
// bf16 and fp16 (CudnnOptions::precision): convolutions and fc layers on 2-byte copies with fp32
// accumulation, everything else fp32, against the fp32 reference, normwise (||got - ref|| /
// ||ref||). Each operand's rounding is a relative error of up to 2^-9 (bf16) or 2^-12 (fp16),
// about 0.6 of that on average; two rounded operands and the rounded result give ~1.6e-3 (bf16)
// per layer, the pre conv and the op together ~2.5e-3, gradients a little more. Tolerances: bf16
// 1e-2 and fp16 2e-3 per op (4-6x those estimates), 3 times that through batch norm; a wrong
// index, a missed cast or a lost accumulation gives errors of order 1.

struct HalfCase {
  Precision precision;
  double tol;
};
const HalfCase kHalfCases[] = {{Precision::bf16, 1e-2}, {Precision::fp16, 2e-3}};

// Why this GPU has no tensor cores for `p` ("" if it has): then make_network refuses it.
std::string lacks_tensor_cores_for(Precision p) {
  const int need = p == Precision::bf16 ? 8 : 7;
  const cuda::GpuInfo gpu = cuda::gpu_info(0, false);
  if (gpu.cc_major >= need) return "";
  return gpu.name + " (compute capability " + std::to_string(gpu.cc_major) + "." + std::to_string(gpu.cc_minor) +
         ") has no " + precision_name(p) + " tensor cores";
}

NetworkFactory cudnn_in(Precision p, bool measure = false) {
  return [p, measure](const Graph& g, int batch) -> std::unique_ptr<Network> {
    return std::make_unique<HostStaged>(
        make_network("cudnn", g, batch, {.measure_conv_algos = measure, .precision = p}));
  };
}

// `check(case)` for each precision this GPU has (the others are said, and left out).
template <class Check>
void for_each_half_case(const Check& check) {
  for (const HalfCase& c : kHalfCases) {
    if (const std::string why = lacks_tensor_cores_for(c.precision); !why.empty()) {
      std::printf("not checked: %s\n", why.c_str());
      continue;
    }
    SCOPED_TRACE(precision_name(c.precision));
    check(c);
  }
}

class CudnnHalfConv : public NeedsCuda, public ::testing::WithParamInterface<ConvCase> {};
class CudnnPrecision : public NeedsCuda {};

TEST_P(CudnnHalfConv, TracksReference) {
  const ConvCase& cc = GetParam();
  const Graph g = single_op(cc.in, cc.pre, [&](Graph& gr, int x) { return gr.conv(x, "conv", cc.spec); });
  for_each_half_case([&](const HalfCase& c) {
    compare_with_reference(cudnn_in(c.precision), g, {.tol = c.tol, .normwise = true});
  });
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CudnnHalfConv,
    ::testing::ValuesIn(conv_cases({
        ConvCase{"after_conv", {3, 8, 8}, 16, conv(32, 3, 3, 1, Pads::same(1))},
        ConvCase{"depthwise_tf_same_stride2", {3, 8, 8}, 16, conv(16, 3, 3, 2, {0, 1, 0, 1}, 16)},  // explicit pad
        ConvCase{"asymmetric_pads_grouped", {4, 8, 7}, 8, conv(8, 3, 3, 2, {1, 0, 2, 1}, 2)},
    })),
    [](const ::testing::TestParamInfo<ConvCase>& p) { return p.param.name; });

TEST_F(CudnnPrecision, FcTracksReference) {
  for_each_half_case([](const HalfCase& c) {
    compare_with_reference(cudnn_in(c.precision),
                           single_op({3, 5, 4}, 16, [](Graph& g, int x) { return g.fc(x, "fc", {10, true}); }),
                           {.tol = c.tol, .normwise = true});
    compare_with_reference(cudnn_in(c.precision), single_op({3, 5, 4}, 0, [](Graph& g, int x) {
                             return g.fc(g.relu(g.fc(x, "fc0", {33, true}), "relu"), "fc1", {10, true});
                           }),
                           {.batch = 3, .tol = c.tol, .normwise = true});
  });
}

// Every kind of layer, measured algorithms (cudnnFind* on 2-byte tensors), batch norm between.
TEST_F(CudnnPrecision, InceptionLikeBlockWithMeasuredAlgorithms) {
  for_each_half_case([](const HalfCase& c) {
    compare_with_reference(cudnn_in(c.precision, true), inception_like(true), {.tol = 3 * c.tol, .normwise = true});
  });
}

// precision(), describe() and layer_precisions() say what computes in what.
TEST_F(CudnnPrecision, SaysWhatComputesInIt) {
  const Graph g = lenet_like();
  int kept = 0;
  for (const Node& n : g.nodes) kept += n.kind != OpKind::input && n.kind != OpKind::conv && n.kind != OpKind::fc;
  for_each_half_case([&](const HalfCase& c) {
    auto net = make_network("cudnn", g, 2, {.precision = c.precision});
    EXPECT_EQ(net->precision(), c.precision);
    const std::string name = precision_name(c.precision), d = net->describe();
    EXPECT_NE(d.find(std::string("convolutions and fc layers in ") + name + " tensor op"), std::string::npos) << d;
    EXPECT_NE(d.find(std::string(" ") + name + " fwd="), std::string::npos) << d;
    EXPECT_NE(d.find(std::string("fc cublasGemmEx ") + name), std::string::npos) << d;
    const std::vector<LayerPrecision> layers = net->layer_precisions();
    EXPECT_EQ(int(layers.size()), kept);
    for (const LayerPrecision& l : layers) {
      EXPECT_EQ(l.precision, Precision::fp32);
      const OpKind k = g.nodes[size_t(l.node)].kind;
      EXPECT_TRUE(k != OpKind::conv && k != OpKind::fc && k != OpKind::input) << g.nodes[size_t(l.node)].name;
      EXPECT_NE(l.why.find(std::string("only convolutions and fully connected layers compute in ") + name), std::string::npos)
          << l.why;
    }
  });
  auto fp32 = make_network("cudnn", g, 2);
  EXPECT_EQ(fp32->precision(), Precision::fp32);
  EXPECT_TRUE(fp32->layer_precisions().empty());
}

// The GPU's casts round as the host's exact conversions (collectives/reduce.h), bit for bit, and
// widen back with and without accumulation.
TEST_F(CudnnPrecision, CastKernelsRoundAsTheHost) {
  std::vector<float> x = random_vector(100003, 13, -300, 300);
  const float special[] = {0.0f, -0.0f, 1e-8f, -3e-6f, 6e-5f, 65504.0f, 65520.0f, -1e5f, 3.0e38f, 1.0f + 0x1p-9f};
  std::copy(std::begin(special), std::end(special), x.begin() + 7);
  cuda::Stream stream;
  const DeviceArray<float> dx = to_device(x, "test input");
  for (DType t : {DType::bf16, DType::f16}) {
    DeviceArray<uint16_t> h(x.size(), "test 2-byte copy");
    gpu::narrow(t, dx.data(), h.data(), int64_t(x.size()), stream.get());
    DeviceArray<float> back = to_device(std::vector<float>(x.size(), 0.5f), "test widened");
    gpu::widen(t, h.data(), back.data(), int64_t(x.size()), true, stream.get());
    std::vector<uint16_t> got(x.size());
    RB_CUDA(cudaMemcpyAsync(got.data(), h.data(), h.bytes(), cudaMemcpyDeviceToHost, stream.get()));
    const std::vector<float> widened = to_host(back.data(), x.size(), stream.get());
    size_t differ = 0, first = x.size();
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t want = t == DType::bf16 ? float_to_bf16(x[i]) : float_to_half(x[i]);
      const float value = t == DType::bf16 ? bf16_to_float(want) : half_to_float(want);
      if (got[i] != want || widened[i] != 0.5f + value) {
        ++differ;
        first = std::min(first, i);
      }
    }
    EXPECT_EQ(differ, 0u) << dtype_name(t) << ": first at " << first << " (" << (first < x.size() ? x[first] : 0)
                          << ")";
  }
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
