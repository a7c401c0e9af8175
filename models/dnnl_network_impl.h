// The oneDNN CPU backend's network class and the helpers its files share (dnnl_network.cc: the
// class's setup helpers, execution and profiler; dnnl_layers.cc: the setup of each op family).
// Internal to those two files; others use make_onednn_network() (backends.h) and dnnl_network.h.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <chrono>
#include <memory>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/device_memory.h"
#include "models/dnnl_network.h"
#include "models/graph.h"
#include "models/network.h"
#include "models/side_thread.h"

namespace ringbench::models::onednn {

using dnnl::memory;
using Md = memory::desc;
using Tag = memory::format_tag;
using Args = std::unordered_map<int, memory>;
using Clock = std::chrono::steady_clock;
constexpr auto f32 = memory::data_type::f32;
constexpr auto bf16 = memory::data_type::bf16;
using Dt = memory::data_type;

// Activation descriptors in data type `dt` (the network's: f32, or bf16 with --precision bf16).
inline memory::dims nchw_dims(int batch, const Dims& d) { return {batch, d.c, d.h, d.w}; }
inline Md plain_md(int batch, const Dims& d, Dt dt = f32) { return Md(nchw_dims(batch, d), dt, Tag::nchw); }
inline Md any_md(int batch, const Dims& d, Dt dt = f32) { return Md(nchw_dims(batch, d), dt, Tag::any); }
inline Md vec_md(int n) { return Md({n}, f32, Tag::x); }

// The format tag of a 4-D activation layout, among those oneDNN picks on CPUs; undef for any
// other.
inline Tag tag_of(const Md& d) {
  for (Tag t : {Tag::nChw16c, Tag::nChw8c, Tag::nchw, Tag::nhwc})
    if (Md(d.dims(), d.data_type(), t) == d) return t;
  return Tag::undef;
}

inline int channel_block(Tag t) { return t == Tag::nChw16c ? 16 : t == Tag::nChw8c ? 8 : 1; }

// The data of `m`, which must be of type T's (float: f32, uint16_t: bf16's bits).
template <class T = float>
T* data(const memory& m) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, uint16_t>);
  if (m.get_desc().data_type() != (std::is_same_v<T, float> ? f32 : bf16))
    throw std::logic_error("onednn network: a host loop read a tensor as another data type than its own");
  return static_cast<T*>(m.get_data_handle());
}

// bf16 <-> fp32 for the host loops: bf16 is fp32's upper half; rounding to nearest even, as
// oneDNN's conversions do, NaN kept a (quiet) NaN.
inline float bf16_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Which passes run an op: forward ops by the kind of forward, backward ops by the kind of the
// forward that preceded them (batch norm and dropout differ).
enum class Mode : uint8_t { always, training, inference };

inline bool active(Mode m, bool training) {
  return m == Mode::always || (m == Mode::training) == training;
}

// One step of a plan: a primitive with its arguments, or a host loop (fn).
struct Op {
  std::string what;
  dnnl::primitive prim;
  Args args;
  std::function<void()> fn;
  Mode mode = Mode::always;
  bool input_grad_only = false;  // backward: feeds only the network input's gradient
  // backward: computes a weight gradient (with a scratchpad of the executing thread's own: it
  // may run on the side thread, set_weight_grad_thread)
  bool weights_grad = false;
};

class OnednnNetwork final : public Network {
 public:
  OnednnNetwork(const Graph& g, int batch, bool inference_only = false, Precision precision = Precision::fp32,
                bool plain_params = false);

  const Graph& graph() const override { return g_; }
  int batch() const override { return batch_; }
  std::string backend() const override { return "onednn"; }
  std::string describe() const override;
  bool inference_only() const override { return inference_; }
  ParamLayout param_layout() const override { return param_layout_; }
  Precision precision() const override { return dt_ == bf16 ? Precision::bf16 : Precision::fp32; }
  std::vector<LayerPrecision> layer_precisions() const override { return layer_precisions_; }

  void bind(float* params, float* grads, float* state) override;
  void params_changed() override;
  void set_input(const float* x) override;
  void forward(const ForwardArgs& args) override;
  void get_output(size_t i, float* y) override;
  void set_output_grad(size_t i, const float* dy) override;
  void backward(const std::function<void(int node)>& on_param_grads) override;
  void get_input_grad(float* dx) override;
  bool set_weight_grad_thread(bool on, const std::vector<int>& cpus = {}) override;

  // See profile_onednn_primitives(); call after a training forward and a backward.
  std::vector<PrimitiveTime> profile(int reps);

 private:
  struct Act {  // a node's output and the gradient of the loss with respect to it
    Md md;
    memory y, dy;  // dy: empty in an inference-only network
  };
  enum class Buf { params, grads, state };
  struct View {  // a memory over a caller-owned flat buffer, pointed there by bind()
    memory mem;
    Buf buf;
    size_t offset;
  };
  struct Converted {  // a reorder already planned: `from` in layout `want` is `to`
    dnnl_memory_t from;
    Md want;
    int scope;  // -1: made in forward (valid everywhere after it); else that node's backward
    bool deferred;
    memory to;
  };
  struct WeightedIo {  // what conv's and fc's backward plans share
    memory src;      // the input as the forward primitive read it
    memory dy;       // the node's output gradient, as the forward primitive's dst is laid out
    memory w_master; // the fp32 weights in the flat parameter buffer (plain, or param_layout_'s)
    Md w_master_md, b_md;
    bool bias;
    // bf16: the forward's bf16 copy of the weights, this step's, which backward data reorders
    // (half the bytes of the fp32 master); empty: from w_master
    memory w_forward = {};
  };
  struct OutputIo {
    Md plain;
    dnnl::reorder to_plain;  // empty when the output already is plain NCHW fp32
  };

  // Setup, one function per op family.
  void setup_conv(int i);
  void setup_batch_norm(int i);
  Op running_stats_op(int i, const memory& mean, const memory& var);
  void setup_eltwise(int i);
  void setup_pool(int i);
  void setup_concat(int i);
  void setup_fc(int i);
  void setup_dropout(int i);
  void setup_outputs();

  // Setup helpers.
  memory alloc(const Md& d);
  Md plain(const Dims& d) const { return plain_md(batch_, d, dt_); }  // in the network's data type
  Md any(const Dims& d) const { return any_md(batch_, d, dt_); }
  Act make_act(const Md& d) { return {d, alloc(d), inference_ ? memory() : alloc(d)}; }
  memory view(const Md& d, Buf buf, size_t offset);
  memory scratch(const Md& d);
  size_t param_offset(int node, size_t k) const { return g_.params[g_.nodes[node].params.at(k)].offset; }
  std::string note(const std::string& family, const dnnl::primitive_desc_base& pd);
  Op prim_op(std::string what, dnnl::primitive prim, Args args, Mode mode = Mode::always, bool deferred = false);
  Op reorder_op(const memory& from, const memory& to, const std::string& what, bool accumulate, bool deferred);
  memory convert(const memory& from, const Md& want, std::vector<Op>& ops, const std::string& what, int scope,
                 bool deferred = false);
  void fold(int p, bool first, const memory& contrib, std::vector<Op>& ops, bool deferred);
  memory sink(int p, bool first, const Md& produced, std::vector<Op>& post, bool deferred);
  void weights_to_master(const memory& from, const memory& master, std::vector<Op>& ops);
  template <class Primitive>
  void plan_backward_data(int i, const typename Primitive::primitive_desc& pd, const WeightedIo& io,
                          const std::string& family);
  template <class Primitive>
  void plan_backward_weights(int i, const typename Primitive::primitive_desc& pd, const WeightedIo& io,
                             const std::string& family);
  bool first_contribution(int p, int consumer, int slot) const {
    return first_slot_[p] == std::pair<int, int>{consumer, slot};
  }
  bool deferred(int p) const { return p == 0 && defer_input_grad_; }
  // Where a forward plans the reorder of its plain weights: param_ops_ when inference-only.
  std::vector<Op>& weight_ops(std::vector<Op>& fwd) { return inference_ ? param_ops_ : fwd; }

  // Weight-gradient ops read their scratchpad from the caller (user mode): the library's
  // shared one may only be used by the thread that created the primitive.
  dnnl::primitive_attr weights_attr() const;
  void need_weights_scratch(const dnnl::primitive_desc_base& pd);

  // Execution. lane 0: the calling thread; 1: the side thread (weight-gradient ops only).
  void run(const Op& op, int lane = 0);
  void run_weight_grads(int node, int lane);
  void backward_here(const std::function<void(int node)>& on_param_grads);
  void backward_beside(const std::function<void(int node)>& on_param_grads);

  Graph g_;
  int batch_;
  // Forward plans only, and only what an inference forward runs: each setup_* returns before
  // its backward plan (NetworkOptions::inference_only).
  bool inference_;
  Dt dt_;  // activations' and the convs', fcs', batch norms', ... arithmetic (f32 or bf16)
  // bf16 training: conv weights that need no padding live in the flat buffers as OIhw16i16o
  // (what bwd_weights writes), listed in param_layout_.
  bool blocked_weights_;
  ParamLayout param_layout_;
  std::vector<LayerPrecision> layer_precisions_;  // the layers computing in another one
  dnnl::engine eng_;
  dnnl::stream strm_;

  std::vector<Act> act_;
  std::vector<std::vector<Op>> fwd_, bwd_;  // per node
  // Inference-only: the weights' reorders into the layouts the primitives read, run by bind()
  // and params_changed() instead of in every forward (training plans them in fwd_: the
  // weights change every step).
  std::vector<Op> param_ops_;
  std::vector<Op> out_grad_ops_;            // output gradients into the outputs' dy
  std::vector<memory> out_dy_;              // plain NCHW, per output
  std::vector<bool> out_dy_set_;
  std::vector<OutputIo> out_io_;
  // bf16: the network input and its gradient cross the interface as plain NCHW fp32.
  dnnl::reorder input_in_, input_grad_out_;

  std::vector<View> views_;
  std::vector<Converted> converted_;
  std::vector<std::pair<int, int>> first_slot_;  // per node: (consumer, input slot) writing its dy first
  bool defer_input_grad_ = false;
  bool has_deferred_ = false;
  std::vector<memory> scratch_users_;  // all share one buffer: each use ends before the next starts
  size_t scratch_bytes_ = 0;
  memory scratch_buf_;
  std::vector<std::pair<std::string, int>> impls_;  // describe(): "conv fwd jit:avx512_core", count
  std::vector<DeviceBuffer> buffers_;  // what every memory from alloc() points into
  std::vector<DeviceVector<float>> dropout_mask_;  // per node: 0 or 1 / (1 - rate) per element

  float* state_ = nullptr;  // read by the running-statistics loops
  ForwardArgs args_;
  bool bound_ = false, forwarded_ = false, backwarded_ = false, last_training_ = true;
  bool input_grad_ready_ = false;

  bool planning_weights_ = false;  // setup: the ops planned now compute weight gradients
  size_t weights_scratch_bytes_ = 0;
  memory weights_scratch_[2];      // per lane
  dnnl::stream side_strm_;
  std::unique_ptr<SideThread> side_;
};

}  // namespace ringbench::models::onednn
