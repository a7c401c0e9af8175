// A models::Network whose model lives on a device server: the client keeps the graph (for the
// shapes) and its host buffers; the server holds the parameters, gradients, state and
// activations, and computes. Per training step crosses what a remote CUDA application moves:
// the input batch (host to device), the launch of forward and backward (control messages), the
// logits out and their gradients in (the loss is computed on the host, as the trainer does),
// each layer's parameter gradients (device to host) as backward finishes them, for the ring
// allreduce, and after the reduction the update's worth back (host to device): the updated
// parameters, since the optimizer runs in the trainer's host buffers; a CUDA application
// would send the averaged gradients and step on the device, the same bytes.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "models/network.h"
#include "runner/remote/client.h"

namespace ringbench::remote {

class RemoteNetwork final : public models::Network {
 public:
  // Opens the network on the server; `g` must outlive this and be the graph of `spec`.
  RemoteNetwork(std::shared_ptr<RemoteDevice> dev, const models::Graph& g, const NetworkSpec& spec);
  ~RemoteNetwork() override;

  const models::Graph& graph() const override { return g_; }
  int batch() const override { return int(spec_.batch); }
  std::string backend() const override { return "remote"; }
  std::string describe() const override;
  void bind(float* params, float* grads, float* state) override;  // uploads params and state
  void params_changed() override;                                  // uploads them again
  void set_input(const float* x) override;
  void forward(const models::ForwardArgs& args) override;
  void get_output(size_t i, float* y) override;
  void set_output_grad(size_t i, const float* dy) override;
  void backward(const std::function<void(int node)>& on_param_grads = {}) override;
  void get_input_grad(float* dx) override;  // not served: Error
  bool inference_only() const override { return spec_.inference_only; }
  models::Precision precision() const override { return static_cast<models::Precision>(spec_.precision); }

  // The server's batch-norm statistics into the bound host state buffer (they change only there).
  void pull_state();
  // Bytes and round trips of the last whole training step (from one training forward to the
  // next; the one in progress when only one ran), and of everything so far.
  Traffic step_traffic() const;
  Traffic total_traffic() const { return dev_->traffic(); }
  const RemoteDevice& device() const { return *dev_; }
  // For the run's JSON: the server, its device, the link, the traffic per step and in all.
  nlohmann::json to_json() const;
  // "# remote device HOST:PORT over tcp (...): <device>" (verbs: the RDMA path too) and the
  // traffic per step, for the headers.
  std::string device_line() const;
  std::string traffic_line() const;

 private:
  void upload(uint32_t buffer, const float* p, size_t floats);

  std::shared_ptr<RemoteDevice> dev_;
  const models::Graph& g_;
  NetworkSpec spec_;
  uint32_t id_ = 0, params_id_ = 0, grads_id_ = 0, state_id_ = 0;
  float *params_ = nullptr, *grads_ = nullptr, *state_ = nullptr;
  bool params_stale_ = false;  // the host's parameters changed (an optimizer step) since the last upload
  Traffic step_start_, last_step_;
  int64_t training_forwards_ = 0;
};

// `ringbench train` and `infer`'s network on a remote device. The graph is built by the caller
// from the same model options.
std::unique_ptr<RemoteNetwork> open_remote_network(std::shared_ptr<RemoteDevice> dev, const models::Graph& g,
                                                   int batch, const models::NetworkOptions& o, int classes,
                                                   int image_size, bool aux_logits);

// Where a 'P' reply's chunk goes in `grads` (g's flat gradient buffer): the range of node
// c.node's own parameters exactly, else IoError naming `who`.
float* grad_chunk_destination(const models::Graph& g, float* grads, const GradChunk& c, const std::string& who);
size_t nodes_with_params(const models::Graph& g);  // the most 'P' chunks one backward may have

}  // namespace ringbench::remote
