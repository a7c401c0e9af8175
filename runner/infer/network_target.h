// An InferTarget over a network's forward pass: one inference-only network (no gradient buffers,
// batch norm in inference mode) per allowed batch size, all bound to one set of parameters. The
// allowed sizes are the powers of two below max_batch and max_batch itself, as serving systems
// bucket their batch sizes; a batch runs on the smallest allowed size that holds it, padded.
// Every network is built at setup: run() only copies the batch in, runs forward and copies the
// logits out (on a GPU that waits for the stream, so a query is done when run() returns).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/checkpoint.h"
#include "models/data.h"
#include "models/model_buffers.h"
#include "models/network.h"
#include "runner/infer/infer_target.h"

namespace ringbench::infer {

// Makes the network of one served batch size (a backend here, or a remote device's).
using NetworkFactory = std::function<std::unique_ptr<models::Network>(int batch, const models::NetworkOptions&)>;

class NetworkTarget final : public InferTarget {
 public:
  NetworkTarget(const NetworkFactory& make, const models::Graph& g, int max_batch, uint64_t seed,
                const models::NetworkOptions& options = {}, const models::Checkpoint* trained = nullptr);
  // Parameters and state from `trained` (a checkpoint of g) when given, else init_params(seed).
  NetworkTarget(const std::string& backend, const models::Graph& g, int max_batch, uint64_t seed,
                const models::NetworkOptions& options = {}, const models::Checkpoint* trained = nullptr);
  void run(int batch) override;

  // Every sample of `d` through the largest network, the last batch padded (with its first
  // sample, not counted): a sample is correct when its largest logit (the first of equals) is
  // its label, as the trainer's evaluation counts.
  struct Accuracy {
    int64_t correct = 0, total = 0;
  };
  Accuracy accuracy(const models::Dataset& d);
  int max_batch() const override { return max_batch_; }

  std::vector<int> allowed_batches() const;
  int padded(int batch) const;  // the allowed size a batch of `batch` runs on
  std::string describe() const;  // the largest network's backend description
  const models::Network& largest() const { return *nets_.back(); }

  // Emulated vGPU time slicing (`vgpu share`): each run() holds the device for its forward pass,
  // whose layers give it up between them when the slice has ended. nullptr: no gate.
  void set_gate(models::DeviceGate* gate);

 private:
  int max_batch_;
  std::vector<std::unique_ptr<models::Network>> nets_;  // by allowed size, ascending
  // Written (seeded or from the checkpoint) before the nets' bind() only, which derives their
  // copies (oneDNN's reordered weights); a later write would need params_changed() on each.
  std::unique_ptr<models::ModelBuffers> buffers_;
  std::vector<float> input_, logits_;
  const models::Graph& g_;
  models::DeviceGate* gate_ = nullptr;
};

}  // namespace ringbench::infer
