// What a backend (naive reference, oneDNN, later CUDA) does with a Graph: run it forward and
// backward at a fixed batch size. Parameters, gradients and batch-norm state live in flat
// buffers the caller owns (laid out by Graph::params / Graph::state, in the backend's memory
// space), so the training loop can allreduce gradient ranges while backward still runs.
// Inputs and outputs cross this interface in plain NCHW float32; inside, a backend keeps
// activations in whatever layout it prefers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/device_gate.h"
#include "models/graph.h"
#include "models/param_layout.h"

namespace ringbench::models {

struct ForwardArgs {
  bool training = true;     // batch statistics (and running-stat updates), dropout on
  uint64_t seed = 0;        // dropout masks: see dropout_keep()
  uint64_t step = 0;
  int64_t sample_offset = 0;  // global index of this batch's first sample (rank * batch)
};

enum class Phase { forward, backward };

// The arithmetic a network computes in (`--precision`). In every precision the parameters,
// gradients, batch-norm statistics and optimizer state stay fp32 in the caller's flat buffers
// (AMP's master weights), and inputs and outputs cross this interface as fp32. bf16 and fp16:
// activations and the convolutions', inner products', batch norms' and poolings' arithmetic
// (oneDNN); on cudnn so far only the convolutions' and inner products' arithmetic, on 2-byte
// copies (layer_precisions() lists the layers that stay fp32); tf32: fp32 storage with TF32
// tensor-core math (GPUs from sm_80).
enum class Precision { fp32, tf32, bf16, fp16 };
const char* precision_name(Precision p);                      // "fp32", "tf32", "bf16", "fp16"
std::optional<Precision> parse_precision(const std::string& s);  // nothing for another name
std::vector<std::string> precision_names();

// A layer that computes in another precision than its network's, and why ("dropout: a host loop
// over fp32").
struct LayerPrecision {
  int node = 0;
  Precision precision = Precision::fp32;
  std::string why;
};

// Layers of equal (precision, why), in the order each pair first appears: a header line each.
struct LayerPrecisionGroup {
  Precision precision = Precision::fp32;
  std::string why;
  std::vector<int> nodes;
};
std::vector<LayerPrecisionGroup> group_layer_precisions(const std::vector<LayerPrecision>& layers);

// Called after each node's forward or backward with its wall-clock span (for --timeline).
using LayerTrace = std::function<void(int node, Phase phase, std::chrono::steady_clock::time_point begin,
                                      std::chrono::steady_clock::time_point end)>;

class Network {
 public:
  virtual ~Network() = default;
  virtual const Graph& graph() const = 0;
  virtual int batch() const = 0;
  virtual std::string backend() const = 0;  // "reference", "onednn", ...
  virtual std::string describe() const = 0; // e.g. implementation names chosen per primitive

  // The buffers stay owned by the caller and must outlive the network (or the next bind).
  // forward() reads params and, in training, updates state; backward() overwrites grads.
  virtual void bind(float* params, float* grads, float* state) = 0;
  // Call after writing new values into the bound params or state buffers from outside forward()
  // and backward() (a checkpoint loaded after bind()), before the next forward(): a network
  // may keep copies derived from them at bind() (an inference-only oneDNN network keeps its
  // conv weights reordered into the layouts its primitives read). Writing before bind() needs
  // no call: bind() derives them.
  virtual void params_changed() {}

  virtual void set_input(const float* x) = 0;  // batch x input_dims, NCHW
  virtual void forward(const ForwardArgs& args) = 0;
  virtual void get_output(size_t i, float* y) = 0;  // batch x dims of graph().outputs[i]
  // Gradient of the loss with respect to output i; outputs not set get zero.
  virtual void set_output_grad(size_t i, const float* dy) = 0;
  // Backward through the whole graph in reverse node order. `on_param_grads(node)` is called
  // as soon as a node's parameter gradients are final in the grads buffer, so gradients
  // become ready in exactly the reverse of their registration order.
  virtual void backward(const std::function<void(int node)>& on_param_grads = {}) = 0;
  virtual void get_input_grad(float* dx) = 0;  // batch x input_dims, NCHW (tests)

  // GPU backends ("cudnn"): the flat buffers are device memory (bind() takes device pointers),
  // forward() and backward() only queue work on the compute stream(), an opaque cudaStream_t,
  // and a gradient reported by on_param_grads is final once the work queued before that call
  // has run (record an event on stream() there). The host-pointer calls (set_input,
  // get_output, ...) copy and wait for the stream.
  virtual bool on_device() const { return false; }
  virtual void* stream() const { return nullptr; }

  // CPU backends: compute the weight gradients on a second thread (one OpenMP thread), beside
  // the data gradients on the calling thread. Meant for a CPU that other work keeps busy: that
  // thread takes what share of the busy CPU it gets without holding up the data gradients (the
  // critical path), where one more OpenMP thread in every primitive stalls the others at each
  // of its barriers while the busy CPU runs someone else. `cpus`: where that thread may run
  // (empty: anywhere). Returns whether the backend does it.
  virtual bool set_weight_grad_thread(bool on, const std::vector<int>& cpus = {}) {
    (void)cpus;
    return !on;
  }

  // The precision the network computes in (NetworkOptions::precision), and the layers that
  // compute in another one (none: every layer computes in precision()).
  virtual Precision precision() const { return Precision::fp32; }
  virtual std::vector<LayerPrecision> layer_precisions() const { return {}; }

  // How the parameter tensors lie in the flat buffers bind() takes (parameters, their gradients
  // and the optimizer's momentum alike): plain, the graph's layout, unless the backend lists a
  // tensor (param_layout.h). Fixed when the network is built; the caller fills the buffers in
  // this layout (to_param_layout) and converts what leaves them (to_plain_params).
  virtual ParamLayout param_layout() const { return {}; }

  // Built with NetworkOptions::inference_only: forward(training = false) only.
  virtual bool inference_only() const { return false; }

  void set_trace(LayerTrace t) { trace_ = std::move(t); }
  // Emulated vGPU time slicing: checkpoint() before each node's forward and backward.
  void set_gate(DeviceGate* g) { gate_ = g; }

 protected:
  LayerTrace trace_;
  DeviceGate* gate_ = nullptr;
};

// How a backend may choose its kernels. measure_conv_algos: cudnn times every convolution
// algorithm at setup (cudnnFind*, as PyTorch's cudnn.benchmark) instead of taking the first of
// cuDNN's heuristics; the other backends have one algorithm per layer and ignore it.
// inference_only: the network runs forward(training = false) and nothing else, so it allocates
// nothing only backward needs (activation gradients, backward primitives and workspaces, saved
// max-pool indices, dropout masks); bind() takes grads == nullptr, and forward(training = true),
// set_output_grad(), backward() and get_input_grad() throw Error. Its outputs are those of a
// training network's forward(training = false) (bit for bit on the CPU backends).
// precision: see Precision; a backend that cannot run it (the reference backend is the fp32
// oracle; fp16 and tf32 need a GPU; bf16 on a CPU needs native bf16 instructions) throws
// std::invalid_argument saying so, never falls back.
struct NetworkOptions {
  bool measure_conv_algos = false;
  bool inference_only = false;
  Precision precision = Precision::fp32;
  // oneDNN bf16 training keeps the conv weights whose channel counts are multiples of 16 in its
  // blocked layout (Network::param_layout); true keeps every tensor plain (the tests' baseline).
  bool plain_params = false;
};

// "reference" (naive loops, the numerical oracle), "onednn" (when built with it) or "cudnn"
// (built with CUDA and a device usable; else it throws std::invalid_argument saying why).
std::unique_ptr<Network> make_network(const std::string& backend, const Graph& g, int batch,
                                      const NetworkOptions& options = {});
std::vector<std::string> available_backends();

// Threads the CPU backend computes with (OpenMP); ranks sharing a machine should split its cores.
void set_compute_threads(int n);
// Keeps the calling thread on `cpus` (empty: leaves it where it may run); false if the kernel
// refused.
bool pin_this_thread(const std::vector<int>& cpus);
int compute_threads();

}  // namespace ringbench::models
