// Inference-only networks (NetworkOptions::inference_only) on the CPU backends, for every zoo
// model at a small size: the outputs equal a training network's forward(training = false) bit
// for bit, and the reference's within backend_compare.h's tolerance; the calls only training has
// throw; the running statistics stay as they were; and a step's memory (the network's buffers
// plus what its caller must allocate) is at most half of a training step's at the same batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend_compare.h"
#include "base/device_memory.h"
#include "base/errors.h"
#include "models/bucket_plan.h"
#include "models/graph.h"
#include "models/network.h"
#include "models/train_buffers.h"
#include "models/zoo.h"
#include "tests/run_command.h"

namespace ringbench::models {
namespace {

using backend_test::close;
using backend_test::in_count;
using backend_test::out_count;
using backend_test::random_params;
using backend_test::random_vector;
using Outputs = std::vector<std::vector<float>>;

constexpr NetworkOptions kInference{.inference_only = true};

// Small sizes: lenet takes 28 px only, inception_v3 75 px at least.
Graph small_model(const std::string& name) {
  const int size = name == "lenet" ? 28 : name == "mobilenet_v1" ? 64 : 75;
  return build_model(name, {.classes = 10, .image_size = size});
}

bool have(const std::string& backend) {
  const std::vector<std::string> b = available_backends();
  return std::find(b.begin(), b.end(), backend) != b.end();
}

// A forward(training = false) on `net` with copies of params and state; `state` becomes the
// state after it.
Outputs infer(Network& net, const std::vector<float>& params, std::vector<float>& state, const std::vector<float>& x) {
  const Graph& g = net.graph();
  std::vector<float> p = params, grads(net.inference_only() ? 0 : g.param_count);
  net.bind(p.data(), net.inference_only() ? nullptr : grads.data(), state.data());
  net.set_input(x.data());
  net.forward({.training = false});
  Outputs out;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    out.emplace_back(out_count(g, i, net.batch()));
    net.get_output(i, out.back().data());
  }
  return out;
}

struct Inputs {
  std::vector<float> params, state, x;
};

Inputs inputs(const Graph& g, int batch) {
  Inputs in;
  random_params(g, 7, in.params, in.state);
  in.x = random_vector(in_count(g, batch), 8);
  return in;
}

// The reference's inference outputs, once per model (the reference is slow).
const Outputs& reference_outputs(const std::string& model, int batch) {
  static std::map<std::string, Outputs> cache;
  auto it = cache.find(model);
  if (it != cache.end()) return it->second;
  const Graph g = small_model(model);
  Inputs in = inputs(g, batch);
  auto net = make_network("reference", g, batch, kInference);
  return cache[model] = infer(*net, in.params, in.state, in.x);
}

void check_outputs(const std::string& backend, const std::string& model) {
  if (!have(backend)) GTEST_SKIP() << backend << " not built";
  const int batch = 2;
  const Graph g = small_model(model);
  const Inputs in = inputs(g, batch);
  std::vector<float> train_state = in.state, infer_state = in.state;
  auto training = make_network(backend, g, batch);
  auto inference = make_network(backend, g, batch, kInference);
  EXPECT_FALSE(training->inference_only());
  EXPECT_TRUE(inference->inference_only());
  const Outputs want = infer(*training, in.params, train_state, in.x);
  const Outputs got = infer(*inference, in.params, infer_state, in.x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << model << " output " << i << ": not bit-identical";
  EXPECT_EQ(infer_state, in.state) << "an inference forward changed the running statistics";
  const Outputs& ref = reference_outputs(model, batch);
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(close(got[i].data(), ref[i].data(), ref[i].size(), 1e-4, model + " output " + std::to_string(i),
                      /*normwise=*/true));
}


// ---------------------------------------------------------------------------------------------
// What an inference-only network refuses.

template <class F>
std::string error_of(F f) {
  return testing::error_of<Error>(f);  // run_command.h
}

void check_training_calls_throw(const std::string& backend) {
  if (!have(backend)) GTEST_SKIP() << backend << " not built";
  const Graph g = small_model("lenet");
  const Inputs in = inputs(g, 2);
  auto net = make_network(backend, g, 2, kInference);
  std::vector<float> params = in.params, state = in.state;
  std::vector<float> dy(out_count(g, 0, 2)), dx(in_count(g, 2));
  net->bind(params.data(), nullptr, state.data());
  net->set_input(in.x.data());
  EXPECT_NE(error_of([&] { net->forward({.training = true}); }).find("built for inference"), std::string::npos);
  net->forward({.training = false});
  for (const std::string& what : {error_of([&] { net->set_output_grad(0, dy.data()); }),
                                  error_of([&] { net->backward(); }), error_of([&] { net->get_input_grad(dx.data()); })})
    EXPECT_NE(what.find("built for inference"), std::string::npos) << "'" << what << "'";
  // A training network still needs its gradient buffer.
  auto training = make_network(backend, g, 2);
  EXPECT_THROW(training->bind(params.data(), nullptr, state.data()), std::invalid_argument);
}

TEST(InferReference, TrainingCallsThrow) { check_training_calls_throw("reference"); }
TEST(InferOnednn, TrainingCallsThrow) { check_training_calls_throw("onednn"); }

// ---------------------------------------------------------------------------------------------
// Memory: the peak of DeviceMemory (which counts every buffer a CPU backend keeps, and what
// make_train_buffers allocates) over one step, from before the buffers to after the step.
// Training: the network, parameters, gradients, momentum and batch-norm state, one forward and
// backward. Inference: the network, parameters and state, one forward.

size_t training_bytes(const std::string& backend, const Graph& g, int batch) {
  return peak_bytes_of([&] {
    auto net = make_network(backend, g, batch);
    const BucketPlan plan = plan_buckets(g, size_t(1) << 20, size_t(25) << 20);
    auto buffers = make_train_buffers(*net, plan, {}, 1);
    net->bind(buffers->params(), buffers->grads(), buffers->state());
    net->set_input(random_vector(in_count(g, batch), 8).data());
    net->forward({.training = true, .seed = 1});
    for (size_t i = 0; i < g.outputs.size(); ++i)
      net->set_output_grad(i, random_vector(out_count(g, i, batch), 9).data());
    net->backward();
  });
}

size_t inference_bytes(const std::string& backend, const Graph& g, int batch) {
  return peak_bytes_of([&] {
    DeviceVector<float> params(g.param_count, 0.0f, DeviceAllocator<float>("parameters"));
    DeviceVector<float> state(g.state_count, 0.0f, DeviceAllocator<float>("batch-norm state"));
    init_params(g, 1, params.data(), state.data());
    auto net = make_network(backend, g, batch, kInference);
    net->bind(params.data(), nullptr, state.data());
    net->set_input(random_vector(in_count(g, batch), 8).data());
    net->forward({.training = false});
  });
}

void check_memory(const std::string& backend, const std::string& model) {
  if (!have(backend)) GTEST_SKIP() << backend << " not built";
  const int batch = 4;
  const Graph g = small_model(model);
  const size_t train = training_bytes(backend, g, batch), inference = inference_bytes(backend, g, batch);
  const double ratio = double(inference) / double(train);
  // The networks' own share: the totals less the caller's flat buffers.
  const size_t p = g.param_count * sizeof(float), st = g.state_count * sizeof(float);
  std::printf("[ memory   ] %s %s batch %d: training %zu bytes (network %zu), inference %zu bytes (network %zu), "
              "ratio %.3f\n",
              backend.c_str(), model.c_str(), batch, train, train - 3 * p - st, inference, inference - p - st, ratio);
  EXPECT_GT(inference, 0u);
  EXPECT_LE(ratio, 0.5) << backend << " " << model << ": inference " << inference << " bytes, training " << train;
}

// ---------------------------------------------------------------------------------------------
// New parameters after bind(): written into the bound buffers, then params_changed() (an
// inference-only oneDNN network keeps its conv weights reordered since bind()); or bound anew.

void check_params_changed(const std::string& backend, const std::string& model) {
  if (!have(backend)) GTEST_SKIP() << backend << " not built";
  const int batch = 2;
  const Graph g = small_model(model);
  const Inputs a = inputs(g, batch);
  Inputs b;
  random_params(g, 11, b.params, b.state);
  std::vector<float> want_state = b.state;
  auto training = make_network(backend, g, batch);
  const Outputs want = infer(*training, b.params, want_state, a.x);
  auto net = make_network(backend, g, batch, kInference);
  std::vector<float> params = a.params, state = a.state;
  net->bind(params.data(), nullptr, state.data());
  net->set_input(a.x.data());
  net->forward({.training = false});
  std::vector<float> before(out_count(g, 0, batch)), got(before.size());
  net->get_output(0, before.data());
  ASSERT_NE(before, want[0]) << "the two parameter sets give the same outputs: the test proves nothing";
  std::copy(b.params.begin(), b.params.end(), params.begin());  // a checkpoint loaded after bind()
  std::copy(b.state.begin(), b.state.end(), state.begin());
  net->params_changed();
  net->forward({.training = false});
  net->get_output(0, got.data());
  EXPECT_EQ(got, want[0]) << model << ": not the new parameters' outputs after params_changed()";
  // bind() to other buffers reorders from them.
  std::vector<float> state_a = a.state;
  const Outputs want_a = infer(*training, a.params, state_a, a.x);
  std::vector<float> state_a2 = a.state;
  EXPECT_EQ(infer(*net, a.params, state_a2, a.x), want_a) << model << ": not the bound parameters' outputs";
}

TEST(InferOnednn, ParamsChangedAfterBind) {
  for (const char* model : {"lenet", "mobilenet_v1"}) check_params_changed("onednn", model);
}
TEST(InferReference, ParamsChangedAfterBind) { check_params_changed("reference", "lenet"); }

// Every CPU backend on every zoo model: outputs, and memory against training's.
class InferNetwork : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(InferNetwork, OutputsMatchTrainingsEvalForwardAndTheReference) {
  check_outputs(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

TEST_P(InferNetwork, MemoryAtMostHalfOfTrainings) { check_memory(std::get<0>(GetParam()), std::get<1>(GetParam())); }

INSTANTIATE_TEST_SUITE_P(Zoo, InferNetwork,
                         ::testing::Combine(::testing::Values("reference", "onednn"),
                                            ::testing::Values("lenet", "mobilenet_v1", "inception_v3")),
                         [](const auto& p) { return std::get<0>(p.param) + "_" + std::get<1>(p.param); });

}  // namespace
}  // namespace ringbench::models
