#include "runner/remote/remote_network.h"

#include <algorithm>
#include <cstdio>

#include "base/errors.h"

namespace ringbench::remote {

RemoteNetwork::RemoteNetwork(std::shared_ptr<RemoteDevice> dev, const models::Graph& g, const NetworkSpec& spec)
    : dev_(std::move(dev)), g_(g), spec_(spec) {
  char ids[16];
  dev_->call(Op::open_network, 0, encode(spec_), nullptr, 0, {.into = ids, .into_len = sizeof ids});
  id_ = get_u32(ids);
  params_id_ = get_u32(ids + 4);
  grads_id_ = get_u32(ids + 8);
  state_id_ = get_u32(ids + 12);
}

RemoteNetwork::~RemoteNetwork() {
  try {
    dev_->call(Op::close_network, id_, "");
  } catch (const std::exception&) {  // the server is gone: it freed everything of ours
  }
}

std::string RemoteNetwork::describe() const {
  const auto& d = dev_->device();
  return "remote on " + dev_->spec().text() + " over " + transport_name(dev_->spec().transport) + ": " +
         d.value("device", std::string("?")) + (d.value("emulated", true) ? " (EMULATED)" : "");
}

void RemoteNetwork::upload(uint32_t buffer, const float* p, size_t floats) {
  if (!buffer || !p || floats == 0) return;
  std::string offset;
  put_u64(offset, 0);
  dev_->call(Op::write, buffer, offset, p, floats * 4);
}

void RemoteNetwork::bind(float* params, float* grads, float* state) {
  params_ = params;
  grads_ = grads;
  state_ = state;
  params_changed();
}

void RemoteNetwork::params_changed() {
  upload(params_id_, params_, g_.param_count);
  upload(state_id_, state_, g_.state_count);
  params_stale_ = false;
}

void RemoteNetwork::set_input(const float* x) {
  dev_->call(Op::set_input, id_, "", x, uint64_t(spec_.batch) * uint64_t(g_.input_dims().numel()) * 4);
}

void RemoteNetwork::forward(const models::ForwardArgs& args) {
  if (args.training) {
    const Traffic now = dev_->traffic();
    if (training_forwards_++ > 0) last_step_ = now - step_start_;
    step_start_ = now;
  }
  if (params_stale_) {
    upload(params_id_, params_, g_.param_count);
    params_stale_ = false;
  }
  dev_->call(Op::forward, id_,
             encode(ForwardCall{args.training, args.seed, args.step, args.sample_offset}));
}

void RemoteNetwork::get_output(size_t i, float* y) {
  std::string idx;
  put_u32(idx, uint32_t(i));
  const uint64_t bytes = uint64_t(spec_.batch) * uint64_t(g_.output_node(i).out.numel()) * 4;
  dev_->call(Op::get_output, id_, idx, nullptr, 0, {.into = y, .into_len = bytes});
}

void RemoteNetwork::set_output_grad(size_t i, const float* dy) {
  std::string idx;
  put_u32(idx, uint32_t(i));
  put_u32(idx, 0);
  dev_->call(Op::set_output_grad, id_, idx, dy, uint64_t(spec_.batch) * uint64_t(g_.output_node(i).out.numel()) * 4);
}

float* grad_chunk_destination(const models::Graph& g, float* grads, const GradChunk& c, const std::string& who) {
  // Only where the node's own parameters are: a server cannot write elsewhere in our memory.
  bool ok = c.node < g.nodes.size() && !g.nodes[c.node].params.empty();
  size_t lo = SIZE_MAX, hi = 0;
  for (int p : ok ? g.nodes[c.node].params : std::vector<int>{}) {
    lo = std::min(lo, g.params[size_t(p)].offset);
    hi = std::max(hi, g.params[size_t(p)].offset + g.params[size_t(p)].numel);
  }
  if (!ok || c.offset != lo || c.count != hi - lo)
    throw IoError(-1, who + " sent gradients for a range that is not node " + std::to_string(c.node) + "'s");
  return grads + c.offset;
}

size_t nodes_with_params(const models::Graph& g) {
  return size_t(std::count_if(g.nodes.begin(), g.nodes.end(), [](const models::Node& n) { return !n.params.empty(); }));
}

void RemoteNetwork::backward(const std::function<void(int node)>& on_param_grads) {
  if (!grads_) throw Error("remote network: backward() without a gradient buffer (inference only)");
  const std::string who = "device server " + dev_->spec().text();
  ChunkSink sink{[&](const GradChunk& c) { return grad_chunk_destination(g_, grads_, c, who); },
                 [&](const GradChunk& c) {
                   if (on_param_grads) on_param_grads(int(c.node));
                 },
                 nodes_with_params(g_)};
  dev_->call(Op::backward, id_, "", nullptr, 0, {.chunks = &sink});
  params_stale_ = true;  // the trainer's optimizer updates the host's parameters next
}

void RemoteNetwork::get_input_grad(float*) {
  throw Error("remote network: the input's gradient is not served by the device server");
}

void RemoteNetwork::pull_state() {
  if (!state_id_ || !state_) return;
  std::string range;
  put_u64(range, 0);
  put_u64(range, g_.state_count * 4);
  dev_->call(Op::read, state_id_, range, nullptr, 0, {.into = state_, .into_len = g_.state_count * 4});
}

Traffic RemoteNetwork::step_traffic() const {
  return training_forwards_ > 1 ? last_step_ : dev_->traffic() - step_start_;
}

nlohmann::json RemoteNetwork::to_json() const {
  return {{"server", dev_->spec().text()}, {"fraction", dev_->spec().fraction}, {"device", dev_->device()},
          {"link", dev_->link()}, {"per_step", step_traffic().to_json()}, {"total", total_traffic().to_json()},
          {"per_step_note", "one training step: parameters up (the update), input batch up, forward and backward "
                            "launched, logits down and their gradients up, every layer's gradients down"}};
}

std::string RemoteNetwork::device_line() const {
  const auto link = dev_->link();
  return "# remote device " + dev_->spec().text() + " over " + dev_->link_text() + " (from " +
         link["local"].get<std::string>() +
         (link["interface"].get<std::string>().empty() ? "" : " on " + link["interface"].get<std::string>()) +
         "): " + dev_->device().value("device", std::string("?")) +
         (dev_->device().value("emulated", true) ? " (EMULATED)" : "") + ", fraction " +
         std::to_string(dev_->spec().fraction).substr(0, 4) + " of its memory\n";
}

std::string RemoteNetwork::traffic_line() const {
  const Traffic t = step_traffic();
  return "# remote traffic per training step: " + bytes_text(t.sent) + " to the device, " + bytes_text(t.received) +
         " from it, " + std::to_string(t.round_trips) + " round trips\n";
}

std::unique_ptr<RemoteNetwork> open_remote_network(std::shared_ptr<RemoteDevice> dev, const models::Graph& g,
                                                   int batch, const models::NetworkOptions& o, int classes,
                                                   int image_size, bool aux_logits) {
  NetworkSpec s;
  s.model = g.model;
  s.batch = uint32_t(batch);
  s.classes = classes;
  s.image_size = image_size;
  s.aux_logits = aux_logits;
  s.inference_only = o.inference_only;
  s.precision = static_cast<uint8_t>(o.precision);
  return std::make_unique<RemoteNetwork>(std::move(dev), g, s);
}

}  // namespace ringbench::remote
