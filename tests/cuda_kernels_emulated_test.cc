// Our CUDA kernels (models/cuda/layer_kernels.cu) on the CPU, through cuda/emulation.h: every
// block as threads with a barrier, so the index math, grid-stride loops and block reductions
// run as written. Each kernel against the reference backend (pooling, dropout) or the formula
// it implements. What the GPU adds (launch limits, memory, streams) is for the gpu tests.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "backend_compare.h"
#include "collectives/reduce.h"
#include "cuda/fast_div.h"
#include "models/cuda/bn_act_kernels.h"
#include "models/cuda/layer_kernels.h"
#include "models/cuda/sgd_kernels.h"
#include "models/sgd.h"
#include "train_helpers.h"

namespace ringbench::models {
namespace {

using backend_test::random_vector;
using backend_test::run_step;

constexpr cudaStream_t kStream = nullptr;

// One pooling layer on the reference backend, and the kernels' geometry for it.
struct PoolCase {
  Graph g;
  PoolSpec spec;
  gpu::PoolGeometry geo;
  int batch = 2;
  int64_t planes() const { return int64_t(batch) * g.input_dims().c; }
};

PoolCase pool_case(bool max, PoolSpec s, Dims in = {3, 7, 6}) {
  PoolCase p;
  p.spec = s;
  const int x = p.g.input(in);
  const int y = max ? p.g.max_pool(x, "pool", s) : p.g.avg_pool(x, "pool", s);
  p.g.add_output(y);
  const Dims& out = p.g.nodes[size_t(y)].out;
  p.geo = {in.h, in.w, out.h, out.w, s.kh, s.kw, s.stride_h, s.stride_w, s.pad.top, s.pad.left};
  return p;
}

// Values with many exact ties (a ReLU's zeros, repeated levels): the first tap must win.
std::vector<float> tied(size_t n, uint32_t seed) {
  auto v = random_vector(n, seed);
  for (float& x : v) x = std::max(0.0f, std::round(x * 3) / 3);
  return v;
}

void expect_equal(const std::vector<float>& want, const std::vector<float>& got, float tol, const char* what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(want[i], got[i], tol) << what << " at " << i;
}

const PoolSpec kPools[] = {
    {.kh = 2, .kw = 2, .stride_h = 2, .stride_w = 2, .pad = {}},
    {.kh = 3, .kw = 3, .stride_h = 2, .stride_w = 2, .pad = {0, 1, 0, 1}},          // TF SAME
    {.kh = 3, .kw = 2, .stride_h = 1, .stride_w = 2, .pad = {1, 1, 1, 0}},
    {.kh = 3, .kw = 3, .stride_h = 1, .stride_w = 1, .pad = Pads::same(1), .exclude_padding = true},
    {.kh = 3, .kw = 3, .stride_h = 1, .stride_w = 1, .pad = Pads::same(1), .exclude_padding = false},
};

TEST(EmulatedKernels, MaxPoolMatchesReferenceIncludingTies) {
  for (const PoolSpec& s : kPools) {
    PoolCase p = pool_case(true, s);
    const size_t in_n = size_t(p.batch) * size_t(p.g.input_dims().numel());
    const size_t out_n = size_t(p.batch) * size_t(p.g.output_node().out.numel());
    const auto x = tied(in_n, 1), dy = random_vector(out_n, 2);
    const auto ref = run_step(backend_test::backend("reference"), p.g, p.batch, {}, {}, x, {dy}, {});
    std::vector<float> y(out_n), dx(in_n, 0.5f);
    std::vector<int32_t> argmax(out_n);
    gpu::max_pool_forward(p.geo, p.planes(), x.data(), y.data(), argmax.data(), kStream);
    expect_equal(ref.outputs[0], y, 0.0f, "max pool forward");
    gpu::max_pool_backward(p.geo, p.planes(), dy.data(), argmax.data(), dx.data(), false, kStream);
    expect_equal(ref.dx, dx, 1e-6f, "max pool backward");
    std::vector<float> acc(in_n, 1.0f);
    gpu::max_pool_backward(p.geo, p.planes(), dy.data(), argmax.data(), acc.data(), true, kStream);
    for (size_t i = 0; i < in_n; ++i) ASSERT_NEAR(acc[i], 1.0f + ref.dx[i], 1e-6f) << "accumulate at " << i;
  }
}

TEST(EmulatedKernels, AvgPoolMatchesReference) {
  for (const PoolSpec& s : kPools) {
    for (bool exclude : {false, true}) {
      PoolSpec spec = s;
      spec.exclude_padding = exclude;
      PoolCase p = pool_case(false, spec);
      const size_t in_n = size_t(p.batch) * size_t(p.g.input_dims().numel());
      const size_t out_n = size_t(p.batch) * size_t(p.g.output_node().out.numel());
      const auto x = random_vector(in_n, 3), dy = random_vector(out_n, 4);
      const auto ref = run_step(backend_test::backend("reference"), p.g, p.batch, {}, {}, x, {dy}, {});
      std::vector<float> y(out_n), dx(in_n);
      gpu::avg_pool_forward(p.geo, exclude, p.planes(), x.data(), y.data(), kStream);
      expect_equal(ref.outputs[0], y, 1e-6f, "avg pool forward");
      gpu::avg_pool_backward(p.geo, exclude, p.planes(), dy.data(), dx.data(), false, kStream);
      expect_equal(ref.dx, dx, 1e-6f, "avg pool backward");
    }
  }
}

TEST(EmulatedKernels, DropoutMasksEqualReference) {
  Graph g;
  const int x = g.input({3, 5, 4});
  const int d = g.dropout(x, "drop", 0.3f);
  g.add_output(d);
  const int batch = 3;
  const ForwardArgs args{.training = true, .seed = 7, .step = 11, .sample_offset = 6};
  const size_t n = size_t(batch) * 60;
  const auto in = random_vector(n, 5), dy = random_vector(n, 6);
  const auto ref = run_step(backend_test::backend("reference"), g, batch, {}, {}, in, {dy}, args);
  gpu::DropoutMask m{args.seed, args.step, d, args.sample_offset, 60, 0.3f};
  std::vector<float> y(n), dx(n);
  gpu::dropout_forward(m, batch, in.data(), y.data(), kStream);
  gpu::dropout_backward(m, batch, dy.data(), dx.data(), false, kStream);
  expect_equal(ref.outputs[0], y, 0.0f, "dropout forward");  // bit for bit
  expect_equal(ref.dx, dx, 0.0f, "dropout backward");
  int dropped = 0;
  for (float v : y) dropped += v == 0.0f;
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, int(n));
}

TEST(EmulatedKernels, PadThenCropIsTheIdentityAndPadsWithZeros) {
  const gpu::PadSpec p{.h = 5, .w = 4, .top = 0, .bottom = 1, .left = 2, .right = 1};
  const int64_t planes = 6;
  const auto x = random_vector(size_t(planes) * 20, 8);
  std::vector<float> xp(size_t(planes) * p.padded_h() * p.padded_w(), 9.0f), back(x.size(), 0.25f);
  gpu::pad_planes(p, planes, x.data(), xp.data(), kStream);
  for (int64_t k = 0; k < planes; ++k)
    for (int py = 0; py < p.padded_h(); ++py)
      for (int px = 0; px < p.padded_w(); ++px) {
        const int iy = py - p.top, ix = px - p.left;
        const bool inside = iy >= 0 && iy < p.h && ix >= 0 && ix < p.w;
        ASSERT_EQ(xp[size_t((k * p.padded_h() + py) * p.padded_w() + px)],
                  inside ? x[size_t((k * p.h + iy) * p.w + ix)] : 0.0f);
      }
  gpu::crop_planes(p, planes, xp.data(), back.data(), true, kStream);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(back[i], 0.25f + x[i]);
}

TEST(EmulatedKernels, ElementwiseAndCopies) {
  const auto x = random_vector(1000, 10, -8, 8), dy = random_vector(1000, 11);
  std::vector<float> y(1000), dx(1000);
  gpu::relu6_forward(x.data(), y.data(), 1000, kStream);
  gpu::relu6_backward(x.data(), dy.data(), dx.data(), 1000, false, kStream);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(y[i], std::min(std::max(x[i], 0.0f), 6.0f));
    ASSERT_EQ(dx[i], x[i] > 0 && x[i] < 6 ? dy[i] : 0.0f);
  }
  // Concat's copy: 3 rows of 5 into a buffer of rows of 8, at column 2.
  std::vector<float> dst(24, -1.0f);
  gpu::copy_rows(dst.data() + 2, 8, x.data(), 5, 5, 3, false, kStream);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 8; ++i)
      ASSERT_EQ(dst[size_t(r * 8 + i)], i >= 2 && i < 7 ? x[size_t(r * 5 + i - 2)] : -1.0f);
}

// The casts around bf16/fp16 convolutions and fc layers, over several blocks and a ragged end.
// The emulation rounds with the host's exact conversions (collectives/reduce.h), so this checks
// the kernels' indexing, types and accumulation; CudnnPrecision.CastKernelsRoundAsTheHost (gpu)
// checks the GPU's rounding against the same conversions.
TEST(EmulatedKernels, CastsToTwoBytesAndBack) {
  std::vector<float> x = random_vector(1003, 12, -4, 4);
  const float special[] = {0.0f, -0.0f, 1e-8f, -3e-6f, 65504.0f, 65520.0f, -1e5f, 3.0e38f, 1.0f + 0x1p-9f};
  std::copy(std::begin(special), std::end(special), x.begin() + 500);
  for (DType t : {DType::bf16, DType::f16}) {
    std::vector<uint16_t> h(x.size() + 1, 0xabcd);  // one past the end: must stay
    gpu::narrow(t, x.data(), h.data(), int64_t(x.size()), kStream);
    std::vector<float> back(x.size(), 0.5f), fresh(x.size(), 7.0f);
    gpu::widen(t, h.data(), back.data(), int64_t(x.size()), true, kStream);
    gpu::widen(t, h.data(), fresh.data(), int64_t(x.size()), false, kStream);
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t want = t == DType::bf16 ? float_to_bf16(x[i]) : float_to_half(x[i]);
      ASSERT_EQ(h[i], want) << dtype_name(t) << " element " << i << " = " << x[i];
      const float value = t == DType::bf16 ? bf16_to_float(want) : half_to_float(want);
      ASSERT_EQ(fresh[i], value) << dtype_name(t) << " element " << i;
      ASSERT_EQ(back[i], 0.5f + value) << dtype_name(t) << " element " << i;
    }
    EXPECT_EQ(h.back(), 0xabcd) << dtype_name(t) << ": written past the end";
  }
  std::vector<uint16_t> h(4);
  EXPECT_THROW(gpu::narrow(DType::f32, x.data(), h.data(), 4, kStream), std::invalid_argument);
}

// Per-channel block reductions over more values than a block has threads.
TEST(EmulatedKernels, BiasGradAndBatchNormBackwardThroughRunningStats) {
  const int batch = 3, channels = 4;
  const int64_t spatial = 130;  // 390 values per channel: more than the 256 threads of a block
  const size_t n = size_t(batch * channels * spatial);
  const auto x = random_vector(n, 12), dy = random_vector(n, 13), gamma = random_vector(4, 14, 0.5f, 1.5f),
             mean = random_vector(4, 15), var = random_vector(4, 16, 0.5f, 2.0f);
  std::vector<float> db(channels), dx(n, 1.0f), dgamma(channels), dbeta(channels);
  gpu::bias_grad(dy.data(), db.data(), batch, channels, spatial, kStream);
  const double eps = 1e-3;
  gpu::bn_backward_global(x.data(), dy.data(), gamma.data(), mean.data(), var.data(), eps, batch, channels,
                          spatial, dx.data(), dgamma.data(), dbeta.data(), true, kStream);
  for (int c = 0; c < channels; ++c) {
    double s = 0, s_xhat = 0;
    const double invstd = 1.0 / std::sqrt(double(var[size_t(c)]) + eps);
    for (int b = 0; b < batch; ++b)
      for (int64_t i = 0; i < spatial; ++i) {
        const size_t at = size_t((b * channels + c) * spatial + i);
        s += dy[at];
        s_xhat += dy[at] * (x[at] - mean[size_t(c)]) * invstd;
        ASSERT_NEAR(dx[at], 1.0 + gamma[size_t(c)] * invstd * dy[at], 1e-5) << "dx at " << at;
      }
    EXPECT_NEAR(db[size_t(c)], s, 1e-4) << "channel " << c;
    EXPECT_NEAR(dbeta[size_t(c)], s, 1e-4) << "channel " << c;
    EXPECT_NEAR(dgamma[size_t(c)], s_xhat, 1e-4) << "channel " << c;
  }
}

// The SGD kernel is the CPU update bit for bit, on any range of tensors (a bucket).
TEST(EmulatedKernels, SgdKernelIsTheCpuUpdateBitForBit) {
  const Graph g = testing::small_cnn();  // small: every emulated GPU thread is a host thread
  const SgdOptions o{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 4e-5f};
  std::vector<size_t> begin;
  std::vector<float> decay;
  for (const ParamTensor& p : g.params) {
    begin.push_back(p.offset);
    decay.push_back(p.decay ? o.weight_decay : 0.0f);
  }
  begin.push_back(g.param_count);
  const auto w0 = random_vector(g.param_count, 20), grad = random_vector(g.param_count, 21),
             v0 = random_vector(g.param_count, 22);
  const int last = int(g.params.size()) - 1;
  for (auto [first, end_tensor] : {std::pair{0, last}, std::pair{1, 2}, std::pair{last, last}}) {
    std::vector<float> w = w0, v = v0, wg = w0, vg = v0;
    sgd_update(g, first, end_tensor, o, w.data(), grad.data(), v.data());
    cuda_kernels::sgd_update(wg.data(), grad.data(), vg.data(), {begin.data(), decay.data()}, first, end_tensor,
                             begin[size_t(first)], begin[size_t(end_tensor) + 1], o.lr, o.momentum, kStream);
    ASSERT_EQ(w, wg) << "tensors " << first << ".." << end_tensor;
    ASSERT_EQ(v, vg) << "tensors " << first << ".." << end_tensor;
  }
}

// Dynamic loss scaling's device check (DeviceBuffers::unscale_if_finite): inf, -inf and NaN
// are found wherever they are (first, last, past a block's range), finite extremes are not, and
// the unscale is the exact product.
TEST(EmulatedKernels, LossScalingFlagsNonFiniteGradientsAndScales) {
  const size_t n = 700;  // three blocks of 256
  const auto g = random_vector(n, 41, -1e38f, 1e38f);
  int flag = 0;
  cuda_kernels::flag_nonfinite(g.data(), n, &flag, kStream);
  EXPECT_EQ(flag, 0);
  std::vector<float> tiny = {std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(), -0.0f};
  cuda_kernels::flag_nonfinite(tiny.data(), tiny.size(), &flag, kStream);
  EXPECT_EQ(flag, 0);
  for (float bad : {INFINITY, -INFINITY, NAN})
    for (size_t at : {size_t(0), size_t(300), n - 1}) {
      std::vector<float> v = g;
      v[at] = bad;
      flag = 0;
      cuda_kernels::flag_nonfinite(v.data(), n, &flag, kStream);
      EXPECT_EQ(flag, 1) << bad << " at " << at;
    }
  std::vector<float> v = g;
  cuda_kernels::scale(v.data(), n, 0x1p-16f, kStream);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], g[i] * 0x1p-16f) << i;
}

// The fused kernels' index division by multiply and shift is exact wherever they use it
// (numerators and divisors below 2^31): every divisor class (1, powers of two, odd, large,
// the largest) at numerators around each multiple and at the ends.
TEST(EmulatedKernels, FastDivIsExactBelowTwoToThe31) {
  std::mt19937 rng(40);
  const uint32_t top = (uint32_t(1) << 31) - 1;
  for (uint32_t d : {1u, 2u, 3u, 6u, 7u, 49u, 64u, 96u, 289u, 12544u, 21609u, 1000003u, (1u << 30) + 1, top}) {
    const cuda::FastDiv f(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, d + 1, top, top - 1, top / d * d, top / d * d - 1};
    for (int i = 0; i < 2000; ++i) {
      const uint32_t q = uint32_t(rng() % (top / d + 1));
      for (uint32_t n : {q * d, q * d + d - 1, uint32_t(rng() % top)})
        if (n <= top) ns.push_back(n);
    }
    for (uint32_t n : ns) {
      ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
      ASSERT_EQ(f.mod(n), n % d) << n << " % " << d;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Batch norm fused with its activation (bn_act_kernels.cu) against the reference backend's two
// separate layers: forward, running statistics, input and parameter gradients, after a
// training and an inference forward. The reference computes in double, the kernels in float
// (statistics and sums in double): within 2e-5 of each tensor's largest magnitude.

struct BnActCase {
  gpu::BnActivation act;
  Dims in;
  int batch;
  bool training;
};

Graph bn_act_graph(const BnActCase& k) {
  Graph g;
  const int b = g.batch_norm(g.input(k.in), "bn");
  if (k.act == gpu::BnActivation::relu) g.add_output(g.relu(b, "act"));
  else if (k.act == gpu::BnActivation::relu6) g.add_output(g.relu6(b, "act"));
  else g.add_output(b);
  return g;
}

void check_bn_act(const BnActCase& k, uint32_t seed) {
  const bool training = k.training;
  const Graph g = bn_act_graph(k);
  std::vector<float> params, state;
  backend_test::random_params(g, seed, params, state);
  for (const ParamTensor& p : g.params)  // gamma up to 6: ReLU6's cap is reached
    if (p.kind == "bn_gamma")
      for (size_t i = 0; i < p.numel; ++i) params[p.offset + i] *= 4.0f;
  const size_t n = backend_test::in_count(g, k.batch);
  auto x = random_vector(n, seed + 1, -2, 2);
  for (float& v : x) v += 5.0f;  // a mean far from 0: the variance must not cancel
  const auto dy = random_vector(n, seed + 2);
  const ForwardArgs args{.training = training};
  const auto ref = run_step(backend_test::backend("reference"), g, k.batch, params, state, x, {dy}, args);

  const int bn = g.output_node().kind == OpKind::batch_norm ? int(g.nodes.size()) - 1 : int(g.nodes.size()) - 2;
  const ParamTensor& gamma = g.params[size_t(g.nodes[size_t(bn)].params[0])];
  const ParamTensor& beta = g.params[size_t(g.nodes[size_t(bn)].params[1])];
  const gpu::BnShape shape{k.batch, k.in.c, int64_t(k.in.h) * k.in.w};
  std::vector<float> running = state, mean(size_t(k.in.c)), invstd(size_t(k.in.c)), y(n);
  std::vector<double> scratch(gpu::bn_act_scratch_doubles(shape));
  const gpu::BnTensors t{params.data() + gamma.offset, params.data() + beta.offset, running.data(), mean.data(),
                         invstd.data()};
  const double eps = g.nodes[size_t(bn)].bn.eps;
  if (training)
    gpu::bn_act_forward_training(shape, k.act, x.data(), t, eps, g.nodes[size_t(bn)].bn.momentum, scratch.data(),
                                 y.data(), kStream);
  else
    gpu::bn_act_forward_inference(shape, k.act, x.data(), t, eps, y.data(), kStream);
  const std::string label = std::string(training ? "training" : "inference") + " c" + std::to_string(k.in.c) +
                            " b" + std::to_string(k.batch) + " act " + std::to_string(int(k.act));
  EXPECT_TRUE(backend_test::close(y.data(), ref.outputs[0].data(), n, 2e-5, label + " forward"));
  EXPECT_TRUE(backend_test::close(running.data(), ref.state.data(), running.size(), 2e-5, label + " running"));

  std::vector<float> dx(n, 0.5f), dgamma(size_t(k.in.c)), dbeta(size_t(k.in.c)), acc(n, 1.0f);
  gpu::bn_act_backward(shape, k.act, training, x.data(), dy.data(), t, scratch.data(),
                       {dx.data(), dgamma.data(), dbeta.data(), false}, kStream);
  EXPECT_TRUE(backend_test::close(dx.data(), ref.dx.data(), n, 2e-5, label + " dx"));
  EXPECT_TRUE(backend_test::close(dgamma.data(), ref.grads.data() + gamma.offset, gamma.numel, 2e-5, label + " dgamma"));
  EXPECT_TRUE(backend_test::close(dbeta.data(), ref.grads.data() + beta.offset, beta.numel, 2e-5, label + " dbeta"));
  gpu::bn_act_backward(shape, k.act, training, x.data(), dy.data(), t, scratch.data(),
                       {acc.data(), dgamma.data(), dbeta.data(), true}, kStream);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(acc[i], 1.0f + dx[i]) << label << " accumulate at " << i;
}

// Small shapes (every emulated GPU thread is a host thread); one with 2100 values per channel,
// over two blocks per channel, and one with a single value per channel (the running variance
// takes the biased one, 0, as the reference does).
TEST(EmulatedKernels, BatchNormFusedWithActivationEqualsTheSeparateLayers) {
  using A = gpu::BnActivation;
  const BnActCase cases[] = {{A::relu, {3, 4, 5}, 2, true},    {A::relu6, {4, 3, 3}, 3, true},
                             {A::relu6, {4, 3, 3}, 3, false},  {A::none, {2, 5, 2}, 2, false},
                             {A::relu6, {1, 30, 70}, 1, true}, {A::relu, {3, 1, 1}, 1, true}};
  uint32_t seed = 30;
  for (const BnActCase& k : cases) check_bn_act(k, seed += 3);
}

// ReLU6's gradient mask, recomputed by the backward, is the one the forward applied: a case
// built so that outputs sit at 0 and 6 and strictly between.
TEST(EmulatedKernels, FusedReluSixMasksTheGradientAtBothEnds) {
  const gpu::BnShape shape{1, 1, 6};
  const std::vector<float> x = {-3, -1, 0.5f, 1, 2, 3};  // mean 0.4166..., normalised to about -1.7..1.3
  const std::vector<float> gamma = {8}, beta = {3};
  std::vector<float> running = {0, 1}, mean(1), invstd(1), y(6), dx(6), dgamma(1), dbeta(1);
  std::vector<double> scratch(gpu::bn_act_scratch_doubles(shape));
  const gpu::BnTensors t{gamma.data(), beta.data(), running.data(), mean.data(), invstd.data()};
  gpu::bn_act_forward_training(shape, gpu::BnActivation::relu6, x.data(), t, 1e-3, 0.1f, scratch.data(), y.data(),
                               kStream);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[5], 6.0f);
  const std::vector<float> dy = {1, 1, 1, 1, 1, 1};
  gpu::bn_act_backward(shape, gpu::BnActivation::relu6, true, x.data(), dy.data(), t, scratch.data(),
                       {dx.data(), dgamma.data(), dbeta.data(), false}, kStream);
  int passed = 0;
  for (float v : y) passed += v > 0 && v < 6;
  EXPECT_EQ(dbeta[0], float(passed));  // sum of dy where 0 < y < 6
  EXPECT_GT(passed, 0);
  EXPECT_LT(passed, 6);
}

}  // namespace
}  // namespace ringbench::models
