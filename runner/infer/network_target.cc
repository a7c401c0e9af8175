#include "runner/infer/network_target.h"

#include <algorithm>
#include <cstdint>

#include "base/errors.h"

namespace ringbench::infer {

namespace {

std::vector<int> bucket_sizes(int max_batch) {
  std::vector<int> sizes;
  for (int b = 1; b < max_batch; b *= 2) sizes.push_back(b);
  sizes.push_back(max_batch);
  return sizes;
}

// Deterministic images in [-1, 1): what arrives is irrelevant to the time a forward pass takes.
std::vector<float> synthetic_images(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (float& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = float(double(s >> 40) / double(1 << 23) - 1.0);
  }
  return v;
}

}  // namespace

NetworkTarget::NetworkTarget(const std::string& backend, const models::Graph& g, int max_batch, uint64_t seed,
                             const models::NetworkOptions& options, const models::Checkpoint* trained)
    : NetworkTarget([&](int b, const models::NetworkOptions& o) { return models::make_network(backend, g, b, o); }, g,
                    max_batch, seed, options, trained) {}

NetworkTarget::NetworkTarget(const NetworkFactory& make, const models::Graph& g, int max_batch, uint64_t seed,
                             const models::NetworkOptions& options, const models::Checkpoint* trained)
    : max_batch_(max_batch), g_(g) {
  if (max_batch < 1) throw Error("--max-batch must be >= 1 (got " + std::to_string(max_batch) + ")");
  models::NetworkOptions o = options;
  o.inference_only = true;
  for (int b : bucket_sizes(max_batch)) nets_.push_back(make(b, o));
  buffers_ = trained ? models::make_model_buffers(*nets_.back(), trained->params, trained->state)
                     : models::make_model_buffers(*nets_.back(), seed);
  for (auto& n : nets_) n->bind(buffers_->params(), nullptr, buffers_->state());
  input_ = synthetic_images(size_t(max_batch) * size_t(g.input_dims().numel()), seed);
  logits_.resize(size_t(max_batch) * size_t(g.output_node(0).out.numel()));
}

std::vector<int> NetworkTarget::allowed_batches() const { return bucket_sizes(max_batch_); }

int NetworkTarget::padded(int batch) const {
  if (batch < 1 || batch > max_batch_)
    throw Error("a batch of " + std::to_string(batch) + " is outside 1.." + std::to_string(max_batch_));
  for (const auto& n : nets_)
    if (n->batch() >= batch) return n->batch();
  return max_batch_;
}

void NetworkTarget::run(int batch) {
  const int size = padded(batch);
  models::Network& net = **std::find_if(nets_.begin(), nets_.end(), [&](const auto& n) { return n->batch() == size; });
  const models::HoldDevice hold(gate_);
  net.set_input(input_.data());
  net.forward({.training = false});
  net.get_output(0, logits_.data());
}

NetworkTarget::Accuracy NetworkTarget::accuracy(const models::Dataset& d) {
  if (!(d.dims == g_.input_dims()))
    throw Error("the dataset's images are " + models::to_string(d.dims) + " but " + g_.model + " takes " +
                models::to_string(g_.input_dims()));
  const size_t b = size_t(max_batch_), per = size_t(d.dims.numel()), classes = size_t(g_.output_node(0).out.c);
  models::Network& net = *nets_.back();
  Accuracy a;
  for (size_t first = 0; first < d.size(); first += b) {
    const size_t n = std::min(b, d.size() - first);
    for (size_t i = 0; i < b; ++i)
      std::copy_n(d.images.data() + (first + (i < n ? i : 0)) * per, per, input_.data() + i * per);
    net.set_input(input_.data());
    net.forward({.training = false});
    net.get_output(0, logits_.data());
    for (size_t i = 0; i < n; ++i) {
      const float* z = logits_.data() + i * classes;
      a.correct += std::max_element(z, z + classes) - z == d.labels[first + i];
    }
    a.total += int64_t(n);
  }
  return a;
}

void NetworkTarget::set_gate(models::DeviceGate* gate) {
  gate_ = gate;
  for (auto& n : nets_) n->set_gate(gate);
}

std::string NetworkTarget::describe() const { return nets_.back()->describe(); }

}  // namespace ringbench::infer
