// An InferTarget over a network's forward pass: one inference-only network (no gradient buffers,
// batch norm in inference mode) per allowed batch size, all bound to one set of parameters. The
// allowed sizes are the powers of two below max_batch and max_batch itself, as serving systems
// bucket their batch sizes; a batch runs on the smallest allowed size that holds it, padded.
// Every network is built at setup: run() only copies the batch in, runs forward and copies the
// logits out (on a GPU that waits for the stream, so a query is done when run() returns).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/model_buffers.h"
#include "models/network.h"
#include "runner/infer/infer_target.h"

namespace ringbench::infer {

class NetworkTarget final : public InferTarget {
 public:
  NetworkTarget(const std::string& backend, const models::Graph& g, int max_batch, uint64_t seed,
                const models::NetworkOptions& options = {});
  void run(int batch) override;
  int max_batch() const override { return max_batch_; }

  std::vector<int> allowed_batches() const;
  int padded(int batch) const;  // the allowed size a batch of `batch` runs on
  std::string describe() const;  // the largest network's backend description

 private:
  int max_batch_;
  std::vector<std::unique_ptr<models::Network>> nets_;  // by allowed size, ascending
  std::unique_ptr<models::ModelBuffers> buffers_;
  std::vector<float> input_, logits_;
};

}  // namespace ringbench::infer
