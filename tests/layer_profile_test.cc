// The per-layer profile behind `train --layer-times`: kinds, arithmetic counts checked against
// the published ones, medians and the per-kind sums.
#include "models/layer_profile.h"

#include <gtest/gtest.h>

#include "models/zoo.h"

namespace ringbench::models {
namespace {

int node_named(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].name == name) return int(i);
  ADD_FAILURE() << "no layer " << name;
  return 0;
}

double forward_macs(const Graph& g) {
  double f = 0;
  for (int i = 1; i < int(g.nodes.size()); ++i) f += forward_flops(g, i, 1);
  return f / 2;
}

TEST(LayerProfile, KindsNameTheConvolutionShape) {
  const Graph m = build_model("mobilenet_v1");
  EXPECT_EQ(layer_kind(m, node_named(m, "Conv2d_0")), "conv 3x3");
  EXPECT_EQ(layer_kind(m, node_named(m, "Conv2d_5_depthwise")), "conv 3x3 depthwise");
  EXPECT_EQ(layer_kind(m, node_named(m, "Conv2d_5_pointwise")), "conv 1x1");
  EXPECT_EQ(layer_kind(m, node_named(m, "Conv2d_5_pointwise.bn")), "batchnorm");
  const Graph i = build_model("inception_v3");
  EXPECT_EQ(layer_kind(i, node_named(i, "Mixed_6b.branch7x7_2")), "conv 1x7");
}

// The published costs of one 224x224 (299x299) image's forward pass: MobileNet v1 1.0 has 569
// million multiply-adds (Howard et al. 2017, table 8); torchvision lists 5.71 G for Inception v3.
TEST(LayerProfile, ForwardArithmeticMatchesThePublishedCounts) {
  EXPECT_NEAR(forward_macs(build_model("mobilenet_v1")) / 569e6, 1.0, 0.005);
  EXPECT_NEAR(forward_macs(build_model("inception_v3")) / 5.71e9, 1.0, 0.005);
  const Graph m = build_model("mobilenet_v1");
  // Conv2d_0: 32 filters of 3x3x3 over a 112x112 output, batch 4.
  EXPECT_EQ(forward_flops(m, node_named(m, "Conv2d_0"), 4), 2.0 * 4 * 32 * 112 * 112 * 27);
  // A depthwise 3x3 over 14x14x512: one 3x3 filter per channel.
  EXPECT_EQ(forward_flops(m, node_named(m, "Conv2d_7_depthwise"), 1), 2.0 * 512 * 14 * 14 * 9);
  EXPECT_EQ(forward_flops(m, node_named(m, "Conv2d_1c_1x1"), 2), 2.0 * 2 * 1024 * 1000);
  EXPECT_EQ(forward_flops(m, node_named(m, "Conv2d_7_depthwise.bn"), 1), 0.0);
}

TEST(LayerProfile, MediansPerLayerAndSumsPerKind) {
  const Graph g = build_model("lenet");
  LayerProfile p(g, 2);
  const int conv1 = 1;
  ASSERT_EQ(g.nodes[conv1].kind, OpKind::conv);
  const double spans[3] = {0.005, 0.001, 0.003};  // median 0.003
  for (double s : spans) {
    for (int i = 1; i < int(g.nodes.size()); ++i) {
      p.add(i, Phase::forward, i == conv1 ? s : 0.001);
      p.add(i, Phase::backward, 0.002);
    }
    p.end_step(10 * s);
  }
  EXPECT_EQ(p.steps(), 3);
  EXPECT_DOUBLE_EQ(p.step_s(), 0.03);
  const auto layers = p.layers();
  ASSERT_EQ(layers.size(), g.nodes.size() - 1);
  EXPECT_EQ(layers[0].name, g.nodes[conv1].name);
  EXPECT_DOUBLE_EQ(layers[0].forward_s, 0.003);
  EXPECT_DOUBLE_EQ(layers[0].backward_s, 0.002);
  EXPECT_DOUBLE_EQ(layers[0].flops, 3 * forward_flops(g, conv1, 2));
  int counted = 0;
  double total = 0, layer_total = 0;
  for (const auto& k : p.kinds()) counted += k.layers, total += k.total_s();
  for (const auto& l : layers) layer_total += l.total_s();
  EXPECT_EQ(counted, int(layers.size()));
  EXPECT_NEAR(total, layer_total, 1e-12);
  const auto kinds = p.kinds();
  for (size_t i = 1; i < kinds.size(); ++i) EXPECT_GE(kinds[i - 1].total_s(), kinds[i].total_s());
  const std::string text = p.to_text(3);
  EXPECT_NE(text.find("# slowest layers:"), std::string::npos) << text;
  EXPECT_NE(text.find(g.nodes[conv1].name), std::string::npos) << text;
  const auto j = p.to_json();
  EXPECT_EQ(j["layers"].size(), layers.size());
  EXPECT_EQ(j["steps"], 3);
}

}  // namespace
}  // namespace ringbench::models
