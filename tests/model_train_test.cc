// Every model trains: a few steps on one fixed batch lower its loss, on the fastest backend
// built (oneDNN; the naive reference backend would take minutes for Inception v3).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "models/network.h"
#include "models/trainer.h"
#include "models/zoo.h"
#include "train_helpers.h"

namespace m = ringbench::models;

namespace {

struct Case {
  const char* model;
  m::ModelOptions opts;
  int batch, steps;
  float lr;
};

class ModelTrains : public ::testing::TestWithParam<Case> {};

TEST_P(ModelTrains, LossFallsOnAFixedBatch) {
  const Case c = GetParam();
  const std::string backend = m::available_backends().front();
  if (backend != "onednn") GTEST_SKIP() << "built without oneDNN: the reference backend is too slow for " << c.model;
  const m::Graph g = m::build_model(c.model, c.opts);
  auto net = m::make_network(backend, g, c.batch);
  m::TrainOptions o;
  o.sgd.lr = c.lr;
  m::Trainer t(*net, o, nullptr);
  auto src = m::make_synthetic_source(g.input_dims(), g.output_node().out.c, c.batch, 7, 0);
  const double first = t.step(*src).loss;
  double last = first;
  for (int i = 1; i < c.steps; ++i) {
    last = t.step(*src).loss;
    ASSERT_TRUE(std::isfinite(last)) << "step " << i;
  }
  EXPECT_LT(last, 0.8 * first) << c.model << ": " << c.steps << " steps on one batch";
  // Every parameter tensor received a gradient (the last step's).
  const std::vector<float> grads = t.host_grads();
  for (const auto& p : g.params) {
    double sum = 0;
    for (size_t i = 0; i < p.numel; ++i) sum += std::fabs(grads[p.offset + i]);
    EXPECT_GT(sum, 0) << p.name << " got no gradient";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, ModelTrains,
    ::testing::Values(Case{"lenet", {}, 8, 6, 0.01f},
                      Case{"mobilenet_v1", {.classes = 10, .image_size = 128}, 4, 6, 0.05f},
                      // Full size, as published, at a tiny batch: the Inception step.
                      Case{"inception_v3", {.classes = 10}, 2, 3, 0.01f},
                      Case{"inception_v3", {.classes = 10, .aux_logits = true}, 2, 3, 0.01f}),
    [](const ::testing::TestParamInfo<Case>& p) {
      return std::string(p.param.model) + (p.param.opts.aux_logits ? "_aux" : "");
    });

// oneDNN follows the reference backend (the oracle) step by step (train_helpers.h); the GPU's
// cudnn does the same in cuda_train_test.cc.
class OnednnTracksReference : public ::testing::TestWithParam<ringbench::testing::TracksReferenceCase> {};

TEST_P(OnednnTracksReference, LossTrajectory) {
  const auto backends = m::available_backends();
  if (std::find(backends.begin(), backends.end(), "onednn") == backends.end()) GTEST_SKIP() << "built without oneDNN";
  ringbench::testing::expect_tracks_reference("onednn", GetParam());
}

INSTANTIATE_TEST_SUITE_P(
    Zoo, OnednnTracksReference,
    ::testing::Values(ringbench::testing::TracksReferenceCase{"lenet", {}, 4, 5, 0.01f},
                      ringbench::testing::TracksReferenceCase{"mobilenet_v1", {.classes = 10, .image_size = 64}, 4,
                                                              1, 0.01f}),
    [](const ::testing::TestParamInfo<ringbench::testing::TracksReferenceCase>& p) {
      return std::string(p.param.model);
    });

}  // namespace
