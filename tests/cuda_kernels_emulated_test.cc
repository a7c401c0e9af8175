// Our CUDA kernels (models/cuda/layer_kernels.cu) on the CPU, through cuda/emulation.h: every
// block as threads with a barrier, so the index math, grid-stride loops and block reductions
// run as written. Each kernel against the reference backend (pooling, dropout) or the formula
// it implements. What the GPU adds (launch limits, memory, streams) is for the gpu tests.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend_compare.h"
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

}  // namespace
}  // namespace ringbench::models
