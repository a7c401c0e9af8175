// bf16 training on oneDNN keeps the fp32 master weights, their gradients and the momentum of
// unpadded conv weights in OIhw16i16o inside the flat buffers (models/param_layout.h), so no
// weight or gradient is reordered to plain each step. The permutation is oneDNN's, the network
// lists exactly the tensors it blocks, and training in the blocked layout gives what the plain
// one gives, bit for bit, on one rank and on two ranks whose allreduce sums the blocked buffers;
// what leaves the buffers (host_params, host_momentum) is plain, and restore() takes plain values.
#include <gtest/gtest.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <memory>
#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "models/network.h"
#include "models/param_layout.h"
#include "models/trainer.h"
#include "models/zoo.h"
#include "bf16_cpu.h"
#include "train_helpers.h"

namespace m = ringbench::models;

namespace {

std::unique_ptr<m::Network> bf16_net(const m::Graph& g, int batch, bool plain_params) {
  return m::make_network("onednn", g, batch, {.precision = m::Precision::bf16, .plain_params = plain_params});
}

m::Graph mobilenet() { return m::build_model("mobilenet_v1", {.classes = 10, .image_size = 64}); }

TEST(ParamLayout, IsOnednnsOIhw16i16oAndRoundTrips) {
  const m::BlockedWeight t{.offset = 5, .out = 32, .in = 48, .kh = 3, .kw = 2};
  const size_t n = 32 * 48 * 3 * 2;
  std::vector<float> flat(n + 7);
  std::iota(flat.begin(), flat.end(), 1.0f);  // unique values: a wrong index cannot hide
  const std::vector<float> plain = flat;
  const m::ParamLayout layout{{t}};
  m::to_param_layout(layout, flat.data());

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const dnnl::memory::dims dims{32, 48, 3, 2};
  using Tag = dnnl::memory::format_tag;
  std::vector<float> want(n);
  dnnl::memory src({dims, dnnl::memory::data_type::f32, Tag::oihw}, eng, const_cast<float*>(plain.data() + 5));
  dnnl::memory dst({dims, dnnl::memory::data_type::f32, Tag::OIhw16i16o}, eng, want.data());
  dnnl::reorder(src, dst).execute(strm, src, dst);
  strm.wait();
  EXPECT_EQ(std::vector<float>(flat.begin() + 5, flat.begin() + 5 + long(n)), want);
  EXPECT_EQ(std::vector<float>(flat.begin(), flat.begin() + 5), std::vector<float>(plain.begin(), plain.begin() + 5));
  EXPECT_EQ(flat.back(), plain.back()) << "an element past the tensor moved";
  m::to_plain_params(layout, flat.data());
  EXPECT_EQ(flat, plain);
  EXPECT_TRUE(m::blockable(32, 48));
  EXPECT_FALSE(m::blockable(32, 3));  // would need padding: stays plain
  EXPECT_FALSE(m::blockable(24, 32));
}

// Exactly the conv weights with both channel counts multiples of 16 (no padding), at their
// graph offsets; none in fp32, with plain_params, or inference-only.
TEST(Bf16MasterLayout, ListsTheUnpaddedConvWeights) {
  SKIP_WITHOUT_BF16();
  const m::Graph g = mobilenet();
  const m::ParamLayout layout = bf16_net(g, 2, false)->param_layout();
  size_t want = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const m::Node& node = g.nodes[i];
    if (node.kind != m::OpKind::conv || node.conv.groups != 1) continue;
    const int in = g.nodes[size_t(node.inputs[0])].out.c;
    const size_t offset = g.params[size_t(node.params[0])].offset;
    const bool listed = std::any_of(layout.blocked.begin(), layout.blocked.end(), [&](const m::BlockedWeight& t) {
      return t.offset == offset && t.out == node.conv.out_channels && t.in == in && t.kh == node.conv.kh &&
             t.kw == node.conv.kw;
    });
    EXPECT_EQ(listed, m::blockable(node.conv.out_channels, in)) << node.name;
    want += m::blockable(node.conv.out_channels, in) ? 1 : 0;
  }
  EXPECT_GT(want, 10u);  // mobilenet's pointwise convs
  EXPECT_EQ(layout.blocked.size(), want);
  EXPECT_NE(bf16_net(g, 2, false)->describe().find("fp32 master weights: " + layout.describe()), std::string::npos);
  EXPECT_TRUE(bf16_net(g, 2, true)->param_layout().plain());
  EXPECT_TRUE(m::make_network("onednn", g, 2, {})->param_layout().plain());
  EXPECT_TRUE(m::make_network("onednn", g, 2, {.inference_only = true, .precision = m::Precision::bf16})
                  ->param_layout()
                  .plain());
}

struct Trained {
  std::vector<double> losses;
  std::vector<float> params, momentum;
};

Trained train_one(const m::Graph& g, bool plain_params) {
  auto net = bf16_net(g, 4, plain_params);
  m::TrainOptions o;
  o.sgd = {.lr = 0.02f, .momentum = 0.9f, .weight_decay = 1e-3f};
  m::Trainer t(*net, o, nullptr);
  ringbench::testing::SliceSource src(g.input_dims(), 10, 4, 0);
  Trained r;
  for (int s = 0; s < 4; ++s) r.losses.push_back(t.step(src).loss);
  r.params = t.host_params();
  r.momentum = t.host_momentum();
  return r;
}

// The same bf16 values reach the same primitives, and SGD is element-wise: bit for bit.
TEST(Bf16MasterLayout, TrainsAsThePlainLayoutDoes) {
  SKIP_WITHOUT_BF16();
  const m::Graph g = mobilenet();
  const Trained blocked = train_one(g, false), plain = train_one(g, true);
  EXPECT_EQ(blocked.losses, plain.losses);
  EXPECT_TRUE(blocked.params == plain.params) << "host_params differ after 4 steps";
  EXPECT_TRUE(blocked.momentum == plain.momentum) << "host_momentum differs after 4 steps";
  std::vector<float> init(g.param_count), state(g.state_count);
  m::init_params(g, m::TrainOptions{}.seed, init.data(), state.data());
  EXPECT_FALSE(blocked.params == init) << "the parameters did not train";
}

// Two ranks, each with its own batch, allreducing the blocked gradient buffers over the ring.
std::vector<float> train_two_ranks(const m::Graph& g, bool plain_params) {
  std::vector<std::vector<float>> result(2);
  ringbench::testing::run_ranks(2, [&](ringbench::Transport& t) {
    auto net = bf16_net(g, 2, plain_params);
    m::TrainOptions o = ringbench::testing::data_parallel_options(64 << 10);
    o.rank = t.rank();
    o.world = 2;
    m::Trainer tr(*net, o, [&](float* grads, size_t count) { return ringbench::testing::ring_reducer(t, grads, count); });
    ringbench::testing::SliceSource src(g.input_dims(), 10, 2, t.rank());
    for (int s = 0; s < 3; ++s) tr.step(src);
    result[size_t(t.rank())] = tr.host_params();
  });
  EXPECT_TRUE(result[0] == result[1]) << "the ranks diverged";
  return result[0];
}

TEST(Bf16MasterLayout, TwoRanksAllreduceTheBlockedGradients) {
  SKIP_WITHOUT_BF16();
  const m::Graph g = mobilenet();
  EXPECT_TRUE(train_two_ranks(g, false) == train_two_ranks(g, true)) << "blocked and plain ranks ended apart";
}

// Trainer::restore (checkpoints, migration) takes plain values: restored into either layout,
// training goes on alike.
TEST(Bf16MasterLayout, RestoreTakesPlainValues) {
  SKIP_WITHOUT_BF16();
  const m::Graph g = mobilenet();
  auto first = bf16_net(g, 4, false);
  m::TrainOptions o;
  o.sgd = {.lr = 0.02f, .momentum = 0.9f, .weight_decay = 1e-3f};
  m::Trainer t(*first, o, nullptr);
  ringbench::testing::SliceSource src(g.input_dims(), 10, 4, 0);
  for (int s = 0; s < 2; ++s) t.step(src);
  auto resumed = [&](bool plain_params) {
    auto net = bf16_net(g, 4, plain_params);
    m::Trainer r(*net, o, nullptr);
    r.restore(t.host_params(), t.host_momentum(), t.host_state(), 2);
    ringbench::testing::SliceSource more(g.input_dims(), 10, 4, 0);
    std::vector<double> losses;
    for (int s = 0; s < 2; ++s) losses.push_back(r.step(more).loss);
    return std::make_pair(losses, r.host_params());
  };
  const auto blocked = resumed(false), plain = resumed(true);
  EXPECT_EQ(blocked.first, plain.first);
  EXPECT_TRUE(blocked.second == plain.second) << "host_params differ 2 steps after the restore";
}

}  // namespace
