// The oneDNN CPU backend. Every primitive is created once, when the network is built; forward
// and backward only execute plans (lists of primitives with their memories, and a few host
// loops). Activations stay in the layouts oneDNN prefers: each conv picks its own (format
// `any`) and the ops after it (batch norm, eltwise, pooling, concat) keep that layout, so
// reorders happen only where a layout really changes: the network input and outputs (plain
// NCHW at the interface), a conv wanting another layout than its producer gives, dropout
// (a host loop on NCHW), weights (the flat buffers hold plain OIHW / [out, in]).
//
// Gradients flow the same way: each node owns a gradient in its activation's layout. The
// first consumer (in backward order) of a node overwrites that gradient, later consumers add
// into it (sum, or a reorder with a sum post-op across layouts). The network input's gradient
// (tests only) is left out of backward() and computed on demand by get_input_grad(), unless a
// batch norm reads the input (its one primitive makes both input and parameter gradients);
// it then uses the weights as they are at that call.
//
// An inference-only network (NetworkOptions::inference_only) plans the forward alone: no
// gradients, no backward primitives or their scratch, no batch statistics or dropout masks, and
// max pooling as forward_inference (no workspace). Every other forward primitive is the one a
// training network runs in an inference forward, so the outputs are equal bit for bit.
//
// FCs run on plain NCHW with the flat weights in place (the weights are the big tensor there);
// convs reorder their weights to the blocked layout they want once per forward, and their
// weight gradients back into the flat buffer in backward. bf16 training keeps the conv weights
// that need no padding in the flat buffers as OIhw16i16o fp32 (param_layout.h), the layout
// bwd_weights writes: their gradients need no reorder, the forward converts them to bf16 within
// blocks, and backward data reorders the forward's bf16 copy (half the bytes of the master). An inference-only network reorders
// the weights once instead, in bind() and again in params_changed() (the same reorder
// primitives into the same memories, so the outputs do not change).
//
// File layout: the class (dnnl_network_impl.h); here its setup helpers, its execution, then the
// profiler; the setup of each op family in dnnl_layers.cc.
#include "models/dnnl_network.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <utility>

#include "base/device_memory.h"
#include "base/errors.h"
#include "models/backends.h"
#include "models/dnnl_network_impl.h"

namespace ringbench::models {
namespace onednn {

// ---------------------------------------------------------------------------------------------
// Setup

namespace {

const char* isa_name(dnnl::cpu_isa isa) {
  using dnnl::cpu_isa;
  switch (isa) {
    case cpu_isa::sse41: return "sse41";
    case cpu_isa::avx: return "avx";
    case cpu_isa::avx2: return "avx2";
    case cpu_isa::avx2_vnni: return "avx2_vnni";
    case cpu_isa::avx512_mic: return "avx512_mic";
    case cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case cpu_isa::avx512_core: return "avx512_core";
    case cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "no vector ISA (isa_all)";
  }
}

// The data type a network of `precision` computes in; bf16 only where the CPU runs it natively
// (oneDNN's bf16 on older CPUs emulates it, slower than fp32), never a silent fallback.
Dt network_data_type(Precision precision) {
  if (precision == Precision::fp32) return f32;
  if (precision != Precision::bf16)
    throw std::invalid_argument(std::string("--precision ") + precision_name(precision) +
                                ": the oneDNN CPU backend computes in fp32 or bf16");
  const auto isa = dnnl::get_effective_cpu_isa();
  const auto need = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);  // ISA values are feature bit sets
  if ((static_cast<unsigned>(isa) & need) != need)
    throw std::invalid_argument(
        std::string("--precision bf16 needs a CPU with native bf16 instructions (AVX512-BF16 or AMX); this one's "
                    "oneDNN ISA is ") +
        isa_name(isa));
  return bf16;
}

}  // namespace

OnednnNetwork::OnednnNetwork(const Graph& g, int batch, bool inference_only, Precision precision,
                             bool plain_params)
    : g_(g),
      batch_(batch),
      inference_(inference_only),
      dt_(network_data_type(precision)),
      blocked_weights_(!inference_only && !plain_params && dt_ == bf16),
      eng_(dnnl::engine::kind::cpu, 0),
      strm_(eng_) {
  check_network_args(g_, batch, "onednn network");
  const int n = int(g_.nodes.size());

  // Who writes each node's gradient first in backward order (backends.h); everyone else
  // accumulates. Where a batch norm reads the input, the input gradient is computed in backward
  // like the others.
  GradientWriters writers = plan_gradient_writers(g_);
  first_slot_ = std::move(writers.first_slot);
  defer_input_grad_ = writers.defer_input_grad;

  act_.resize(size_t(n));
  fwd_.resize(size_t(n));
  bwd_.resize(size_t(n));
  dropout_mask_.resize(size_t(n));
  act_[0] = make_act(plain(g_.nodes[0].out));
  if (dt_ != f32) {
    const Md user = plain_md(batch_, g_.nodes[0].out);
    input_in_ = dnnl::reorder(dnnl::reorder::primitive_desc(eng_, user, eng_, act_[0].md));
    if (!inference_) input_grad_out_ = dnnl::reorder(dnnl::reorder::primitive_desc(eng_, act_[0].md, eng_, user));
  }
  for (int i = 1; i < n; ++i) {
    const Node& node = g_.nodes[i];
    try {
      switch (node.kind) {
        case OpKind::input: throw std::invalid_argument("only node 0 may be an input");
        case OpKind::conv: setup_conv(i); break;
        case OpKind::batch_norm: setup_batch_norm(i); break;
        case OpKind::relu:
        case OpKind::relu6: setup_eltwise(i); break;
        case OpKind::max_pool:
        case OpKind::avg_pool: setup_pool(i); break;
        case OpKind::concat: setup_concat(i); break;
        case OpKind::fc: setup_fc(i); break;
        case OpKind::dropout: setup_dropout(i); break;
      }
    } catch (const dnnl::error& e) {
      throw Error("onednn network: layer '" + node.name + "' (" + op_name(node.kind) + "): " + e.what());
    }
    if (act_[i].md.dims() != nchw_dims(batch_, node.out))
      throw std::logic_error("onednn network: layer '" + node.name + "' produced another shape than the graph's " +
                             to_string(node.out));
  }
  setup_outputs();

  for (const auto& ops : bwd_)
    for (const Op& op : ops) has_deferred_ = has_deferred_ || op.input_grad_only;
  if (scratch_bytes_ > 0) {
    scratch_buf_ = alloc(Md({memory::dim(scratch_bytes_ / sizeof(float) + 1)}, f32, Tag::x));
    for (memory& m : scratch_users_) m.set_data_handle(scratch_buf_.get_data_handle());
  }
  if (!inference_) weights_scratch_[0] = alloc(Md({memory::dim(weights_scratch_bytes_ / sizeof(float) + 1)}, f32, Tag::x));
}

dnnl::primitive_attr OnednnNetwork::weights_attr() const {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

void OnednnNetwork::need_weights_scratch(const dnnl::primitive_desc_base& pd) {
  weights_scratch_bytes_ = std::max(weights_scratch_bytes_, pd.scratchpad_desc().get_size());
}

memory OnednnNetwork::alloc(const Md& d) {
  buffers_.emplace_back(d.get_size(), "onednn tensor");
  memory m(d, eng_, buffers_.back().data());
  if (d.get_size() > 0) std::memset(m.get_data_handle(), 0, d.get_size());  // dead-end gradients stay zero
  return m;
}

memory OnednnNetwork::view(const Md& d, Buf buf, size_t offset) {
  memory m(d, eng_, nullptr);
  views_.push_back({m, buf, offset});
  return m;
}

memory OnednnNetwork::scratch(const Md& d) {
  memory m(d, eng_, nullptr);
  scratch_users_.push_back(m);
  scratch_bytes_ = std::max(scratch_bytes_, d.get_size());
  return m;
}

std::string OnednnNetwork::note(const std::string& family, const dnnl::primitive_desc_base& pd) {
  std::string key = family + " " + pd.impl_info_str();
  count_impl(impls_, key);
  return key;
}

Op OnednnNetwork::prim_op(std::string what, dnnl::primitive prim, Args args, Mode mode, bool deferred) {
  Op op;
  op.what = std::move(what);
  op.prim = std::move(prim);
  op.args = std::move(args);
  op.mode = mode;
  op.input_grad_only = deferred;
  op.weights_grad = planning_weights_;
  return op;
}

Op OnednnNetwork::reorder_op(const memory& from, const memory& to, const std::string& what, bool accumulate,
                             bool deferred) {
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  if (planning_weights_) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::reorder::primitive_desc pd(eng_, from.get_desc(), eng_, to.get_desc(), attr);
  if (planning_weights_) need_weights_scratch(pd);
  return prim_op(note(what, pd), dnnl::reorder(pd), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, Mode::always,
                 deferred);
}

// `from` in layout `want`: itself when it already is, else a reorder planned into `ops` (once:
// forward conversions are shared by all later users, backward ones within their node).
memory OnednnNetwork::convert(const memory& from, const Md& want, std::vector<Op>& ops, const std::string& what,
                              int scope, bool deferred) {
  if (from.get_desc() == want) return from;
  for (const Converted& c : converted_)
    if (c.from == from.get() && c.want == want && (c.scope == -1 || c.scope == scope) && (!c.deferred || deferred))
      return c.to;
  memory to = alloc(want);
  ops.push_back(reorder_op(from, to, what, false, deferred));
  converted_.push_back({from.get(), want, scope, deferred, to});
  return to;
}

// Adds a consumer's gradient contribution `contrib` (any layout) into node p's dy.
void OnednnNetwork::fold(int p, bool first, const memory& contrib, std::vector<Op>& ops, bool deferred) {
  const Act& a = act_[p];
  if (first || contrib.get_desc() != a.md) {
    ops.push_back(reorder_op(contrib, a.dy, first ? "reorder diff" : "reorder+sum diff", !first, deferred));
    return;
  }
  const dnnl::sum::primitive_desc pd(a.md, {1.0f, 1.0f}, {a.md, a.md}, eng_);
  ops.push_back(prim_op(note("sum diff", pd), dnnl::sum(pd),
                        {{DNNL_ARG_MULTIPLE_SRC, a.dy}, {DNNL_ARG_MULTIPLE_SRC + 1, contrib}, {DNNL_ARG_DST, a.dy}},
                        Mode::always, deferred));
}

// Where a consumer's primitive writes its gradient for node p (produced in layout `produced`):
// p's dy itself when it may overwrite it in that layout, else scratch folded in by `post`.
memory OnednnNetwork::sink(int p, bool first, const Md& produced, std::vector<Op>& post, bool deferred) {
  if (first && produced == act_[p].md) return act_[p].dy;
  memory s = scratch(produced);
  fold(p, first, s, post, deferred);
  return s;
}

// Blocked weight gradients into the flat gradient buffer's layout for them (plain, or a blocked
// master layout: a plain reorder). oneDNN 2.6's direct reorder
// from the layouts blocked "i-major, o-minor" (OIhw16i16o, bwd_weights' choice for 1x1 convs)
// to plain is pathologically slow for large power-of-two input counts (4.1 ms for 1024x1024
// on AVX-512, single thread), while going through the transposed blocking takes 0.3 + 0.3 ms.
void OnednnNetwork::weights_to_master(const memory& from, const memory& master, std::vector<Op>& ops) {
  const Md& md = from.get_desc();
  const memory::dims dims = md.dims();
  if (master.get_desc() != Md(dims, f32, dims.size() == 5 ? Tag::goihw : Tag::oihw)) {
    ops.push_back(reorder_op(from, master, "reorder diff_weights", false, false));
    return;
  }
  const memory& plain = master;
  using Detour = std::pair<Tag, Tag>;  // slow source layout, intermediate
  const std::vector<Detour> detours =
      dims.size() == 5 ? std::vector<Detour>{{Tag::gOIhw16i16o, Tag::gOIhw16o16i}, {Tag::gOIhw8i8o, Tag::gOIhw8o8i}}
                       : std::vector<Detour>{{Tag::OIhw16i16o, Tag::OIhw16o16i}, {Tag::OIhw8i8o, Tag::OIhw8o8i}};
  for (const auto& [slow, via] : detours)
    if (Md(dims, f32, slow) == md) {
      const memory mid = alloc(Md(dims, f32, via));
      ops.push_back(reorder_op(from, mid, "reorder diff_weights (transpose blocks)", false, false));
      ops.push_back(reorder_op(mid, plain, "reorder diff_weights", false, false));
      return;
    }
  ops.push_back(reorder_op(from, plain, "reorder diff_weights", false, false));
}


void OnednnNetwork::setup_outputs() {
  for (size_t k = 0; k < g_.outputs.size(); ++k) {
    const int p = g_.outputs[k].node;
    const Md plain = plain_md(batch_, g_.nodes[p].out);  // fp32 at the interface
    if (!inference_) {
      out_dy_.push_back(alloc(plain));
      bool first = true;
      for (size_t j = 0; j < k; ++j) first = first && g_.outputs[j].node != p;
      fold(p, first, out_dy_.back(), out_grad_ops_, false);
    }
    OutputIo io{plain, {}};
    if (act_[p].md != plain) io.to_plain = dnnl::reorder(dnnl::reorder::primitive_desc(eng_, act_[p].md, eng_, plain));
    out_io_.push_back(std::move(io));
  }
  out_dy_set_.assign(g_.outputs.size(), false);
}

std::string OnednnNetwork::describe() const {
  std::string out = describe_impls(dt_ == f32 ? "onednn" : "onednn (bf16)", impls_);
  if (!param_layout_.plain()) out += "; fp32 master weights: " + param_layout_.describe();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Execution

void OnednnNetwork::run(const Op& op, int lane) {
  if (!op.prim) {
    strm_.wait();  // host loops read what the primitives before them wrote
    op.fn();
  } else if (!op.weights_grad) {
    op.prim.execute(strm_, op.args);
  } else {
    Args args = op.args;
    args[DNNL_ARG_SCRATCHPAD] = weights_scratch_[lane];
    op.prim.execute(lane == 0 ? strm_ : side_strm_, args);
  }
}

void OnednnNetwork::run_weight_grads(int node, int lane) {
  for (const Op& op : bwd_[size_t(node)])
    if (op.weights_grad && !op.input_grad_only && active(op.mode, last_training_)) run(op, lane);
  (lane == 0 ? strm_ : side_strm_).wait();
}

bool OnednnNetwork::set_weight_grad_thread(bool on, const std::vector<int>& cpus) {
  if (!on || inference_) {
    side_.reset();
    return !on;
  }
  if (side_) return true;
  weights_scratch_[1] = alloc(weights_scratch_[0].get_desc());
  side_strm_ = dnnl::stream(eng_);
  // One OpenMP thread there, with the calling thread's floating-point mode (set_compute_threads).
  side_ = std::make_unique<SideThread>([this](int node, int lane) { run_weight_grads(node, lane); },
                                       [cpus] {
                                         pin_this_thread(cpus);
                                         set_compute_threads(1);
                                       });
  return true;
}

void OnednnNetwork::bind(float* params, float* grads, float* state) {
  check_bind_args(g_, params, grads, state, "onednn network", inference_);
  state_ = state;
  for (const View& v : views_) {
    float* base = v.buf == Buf::params ? params : v.buf == Buf::grads ? grads : state;
    v.mem.set_data_handle(base + v.offset);
  }
  bound_ = true;
  forwarded_ = backwarded_ = false;
  params_changed();
}

void OnednnNetwork::params_changed() {
  if (!bound_) throw std::logic_error("onednn network: params_changed() called before bind()");
  for (const Op& op : param_ops_) run(op);
  strm_.wait();
}

// Between memory `m` (the network's layout and type) and the interface's plain NCHW fp32 at
// `user`: `convert` (a reorder in that direction) where they differ, else a copy.
static void exchange(const dnnl::reorder& convert, memory m, float* user, bool into_m, dnnl::stream& strm) {
  const size_t bytes = m.get_desc().get_size();
  if (!convert) {
    if (into_m) std::memcpy(m.get_data_handle(), user, bytes);
    else std::memcpy(user, m.get_data_handle(), bytes);
    return;
  }
  memory u(Md(m.get_desc().dims(), f32, Tag::nchw), m.get_engine(), user);
  if (into_m) convert.execute(strm, u, m);
  else convert.execute(strm, m, u);
  strm.wait();
}

void OnednnNetwork::set_input(const float* x) {
  exchange(input_in_, act_[0].y, const_cast<float*>(x), true, strm_);
}

void OnednnNetwork::forward(const ForwardArgs& args) {
  if (!bound_) throw std::logic_error("onednn network: forward() called before bind()");
  check_forward_mode(inference_, args, "onednn network");
  args_ = args;
  for (size_t i = 1; i < fwd_.size(); ++i) {
    if (gate_) {
      strm_.wait();
      gate_->checkpoint();
    }
    const auto begin = trace_ ? Clock::now() : Clock::time_point{};
    for (const Op& op : fwd_[i])
      if (active(op.mode, args.training)) run(op);
    if (trace_) {
      strm_.wait();
      trace_(int(i), Phase::forward, begin, Clock::now());
    }
  }
  strm_.wait();
  last_training_ = args.training;
  forwarded_ = true;
  backwarded_ = false;
}

void OnednnNetwork::get_output(size_t i, float* y) {
  check_output_index(g_, i, "get_output()", "onednn network");
  if (!forwarded_) throw std::logic_error("onednn network: get_output() called before forward()");
  const Act& a = act_[size_t(g_.outputs[i].node)];
  const OutputIo& io = out_io_[i];
  if (io.to_plain) {
    memory src = a.y, dst(io.plain, eng_, y);
    io.to_plain.execute(strm_, src, dst);
    strm_.wait();
  } else {
    std::memcpy(y, a.y.get_data_handle(), io.plain.get_size());
  }
}

void OnednnNetwork::set_output_grad(size_t i, const float* dy) {
  check_training_call(inference_, "set_output_grad()", "onednn network");
  check_output_index(g_, i, "set_output_grad()", "onednn network");
  std::memcpy(out_dy_[i].get_data_handle(), dy, out_io_[i].plain.get_size());
  out_dy_set_[i] = true;
}

void OnednnNetwork::backward(const std::function<void(int node)>& on_param_grads) {
  check_training_call(inference_, "backward()", "onednn network");
  if (!bound_) throw std::logic_error("onednn network: backward() called before bind()");
  if (!forwarded_) throw std::logic_error("onednn network: backward() called before forward()");
  for (size_t k = 0; k < out_dy_.size(); ++k) {
    if (!out_dy_set_[k]) std::memset(out_dy_[k].get_data_handle(), 0, out_io_[k].plain.get_size());
    out_dy_set_[k] = false;  // outputs not set before the next backward get zero
  }
  for (const Op& op : out_grad_ops_) run(op);
  if (side_ && !gate_ && !trace_) {
    backward_beside(on_param_grads);
  } else {
    backward_here(on_param_grads);
  }
  backwarded_ = true;
  input_grad_ready_ = !has_deferred_;
}

void OnednnNetwork::backward_here(const std::function<void(int node)>& on_param_grads) {
  for (size_t i = bwd_.size() - 1; i >= 1; --i) {
    if (gate_) gate_->checkpoint();
    const auto begin = trace_ ? Clock::now() : Clock::time_point{};
    for (const Op& op : bwd_[i])
      if (!op.input_grad_only && active(op.mode, last_training_)) run(op);
    strm_.wait();
    const auto end = trace_ ? Clock::now() : Clock::time_point{};
    if (on_param_grads && !g_.nodes[i].params.empty()) on_param_grads(int(i));
    if (trace_) trace_(int(i), Phase::backward, begin, end);
  }
}

// The data gradients here, each weighted node's weight gradients on the side thread as soon as
// the node's data gradient is out; on_param_grads in node order as they become final.
void OnednnNetwork::backward_beside(const std::function<void(int node)>& on_param_grads) {
  side_->begin(bwd_.size());
  std::vector<std::pair<int, bool>> with_params;  // node, on the side thread
  size_t told = 0;
  auto tell = [&](bool wait_done) {
    for (; told < with_params.size(); ++told) {
      const auto [node, beside] = with_params[told];
      if (beside && !wait_done && !side_->done(node)) return;
      if (on_param_grads) on_param_grads(node);
    }
  };
  try {
    for (size_t i = bwd_.size() - 1; i >= 1; --i) {
      bool beside = false;
      for (const Op& op : bwd_[i])
        if (!op.input_grad_only && active(op.mode, last_training_)) {
          if (op.weights_grad) beside = true;
          else run(op);
        }
      strm_.wait();
      if (beside) side_->post(int(i));
      if (!g_.nodes[i].params.empty()) with_params.emplace_back(int(i), beside);
      tell(false);
    }
  } catch (...) {
    try {
      side_->finish();  // nothing may run on after this backward has failed
    } catch (...) {
    }
    throw;
  }
  side_->finish();
  tell(true);
}

void OnednnNetwork::get_input_grad(float* dx) {
  check_training_call(inference_, "get_input_grad()", "onednn network");
  if (!backwarded_) throw std::logic_error("onednn network: get_input_grad() called before backward()");
  if (!input_grad_ready_) {  // the ops that feed only the input gradient, skipped by backward()
    for (size_t i = bwd_.size() - 1; i >= 1; --i)
      for (const Op& op : bwd_[i])
        if (op.input_grad_only && active(op.mode, last_training_)) run(op);
    strm_.wait();
    input_grad_ready_ = true;
  }
  exchange(input_grad_out_, act_[0].dy, dx, false, strm_);
}

// ---------------------------------------------------------------------------------------------
// Profiling

std::vector<PrimitiveTime> OnednnNetwork::profile(int reps) {
  // The ops of a training step, in the order forward() and backward() run them.
  struct Entry {
    const Op* op;
    int node;
    Phase phase;
  };
  std::vector<Entry> step;
  for (size_t i = 1; i < fwd_.size(); ++i)
    for (const Op& op : fwd_[i])
      if (active(op.mode, true)) step.push_back({&op, int(i), Phase::forward});
  for (const Op& op : out_grad_ops_) step.push_back({&op, -1, Phase::backward});
  for (size_t i = bwd_.size() - 1; i >= 1; --i)
    for (const Op& op : bwd_[i])
      if (!op.input_grad_only && active(op.mode, true)) step.push_back({&op, int(i), Phase::backward});

  auto timed = [&](const Op& op) {
    const auto begin = Clock::now();
    run(op);
    strm_.wait();
    return std::chrono::duration<double>(Clock::now() - begin).count();
  };
  auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  // Within whole steps, then each op alone.
  std::vector<std::vector<double>> in_step(step.size());
  for (int r = 0; r < reps; ++r)
    for (size_t k = 0; k < step.size(); ++k) in_step[k].push_back(timed(*step[k].op));
  std::vector<PrimitiveTime> out;
  std::vector<double> alone(static_cast<size_t>(reps));
  for (size_t k = 0; k < step.size(); ++k) {
    for (double& t : alone) t = timed(*step[k].op);
    const std::string node = step[k].node < 0 ? "(outputs)" : g_.nodes[size_t(step[k].node)].name;
    out.push_back({node, step[k].op->what, step[k].phase, median(alone), median(in_step[k])});
  }
  return out;
}

}  // namespace onednn

using onednn::OnednnNetwork;

std::unique_ptr<Network> make_onednn_network(const Graph& g, int batch, bool inference_only, Precision precision,
                                             bool plain_params) {
  return std::make_unique<OnednnNetwork>(g, batch, inference_only, precision, plain_params);
}

std::vector<PrimitiveTime> profile_onednn_primitives(const Graph& g, int batch, int reps, Precision precision) {
  if (reps < 1) throw std::invalid_argument("profile_onednn_primitives: reps must be >= 1");
  OnednnNetwork net(g, batch, false, precision);
  std::vector<float> params(g.param_count), grads(g.param_count), state(g.state_count);
  init_params(g, 1, params.data(), state.data());
  to_param_layout(net.param_layout(), params.data());
  net.bind(params.data(), grads.data(), state.data());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(size_t(batch) * size_t(g.input_dims().numel()));
  for (float& v : x) v = u(rng);
  net.set_input(x.data());
  net.forward({.training = true, .seed = 1});
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    std::vector<float> dy(size_t(batch) * size_t(g.output_node(k).out.numel()));
    for (float& v : dy) v = 0.01f * u(rng);
    net.set_output_grad(k, dy.data());
  }
  net.backward({});
  return net.profile(reps);
}

}  // namespace ringbench::models
