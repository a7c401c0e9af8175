#include "runner/remote/session.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "base/device_memory.h"
#include "base/errors.h"
#include "models/zoo.h"

namespace ringbench::remote {

namespace {

constexpr size_t kMaxObjects = 4096;  // buffers and networks one client may hold at once

std::string mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", double(bytes) / double(1 << 20));
  return b;
}

// The range of the gradient buffer (in floats) a node's parameters occupy; count 0 when none.
GradChunk node_range(const models::Graph& g, int node) {
  GradChunk c{uint32_t(node), 0, 0};
  const auto& ps = g.nodes[size_t(node)].params;
  if (ps.empty()) return c;
  size_t lo = SIZE_MAX, hi = 0;
  for (int p : ps) {
    lo = std::min(lo, g.params[size_t(p)].offset);
    hi = std::max(hi, g.params[size_t(p)].offset + g.params[size_t(p)].numel);
  }
  c.offset = lo;
  c.count = hi - lo;
  return c;
}

// HoldDevice that can let the device go for a while (a send to the client): leaves at the end
// only if it holds it then.
class GateHold {
 public:
  explicit GateHold(models::DeviceGate* g) : g_(g) { enter(); }
  ~GateHold() {
    try {
      leave();
    } catch (...) {  // a closed gate: the next enter() says why
    }
  }
  GateHold(const GateHold&) = delete;
  GateHold& operator=(const GateHold&) = delete;
  void enter() {
    if (g_ && !held_) g_->enter();
    held_ = true;
  }
  void leave() {
    if (g_ && held_) {
      held_ = false;
      g_->leave();
    }
  }

 private:
  models::DeviceGate* g_;
  bool held_ = false;
};

}  // namespace

Session::Session(Device& d, Channel& c) : d_(d), c_(c) {}

Session::~Session() {
  nets_.clear();
  for (auto& [id, b] : buffers_) DeviceMemory::instance().release(b.bytes);
  buffers_.clear();
  d_.leave_seat(seat_);
}

std::string Session::serve() {
  for (;;) {
    char h[kHeaderBytes];
    if (!c_.read(h, sizeof h, d_.config().idle_timeout, true))
      return c_.peer() + " left after " + std::to_string(requests_) + " request(s), holding at most " + mib(peak_) +
             "; freed its " + mib(charged_);
    try {
      std::string why;
      const auto r = decode_request(h, &why);
      if (!r) throw Error(why);
      if ((requests_ == 0) != (r->op == Op::hello))
        throw Error(requests_ == 0 ? "the first request must be hello" : "hello twice");
      handle(*r);
      ++requests_;
    } catch (const IoError&) {
      throw;  // the connection is gone: nothing to answer
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      try {
        reply('E', msg);
      } catch (const std::exception&) {  // the client is gone too: the error says why we stopped
      }
      throw Error(msg);
    }
  }
}

void Session::handle(const RequestHeader& h) {
  switch (h.op) {
    case Op::hello: return hello(small_payload(h, 8));
    case Op::open_network: return open_network(small_payload(h, kNetworkSpecBytes));
    case Op::close_network: small_payload(h, 0); close_network(h.handle); return reply('O', "");
    case Op::alloc: {
      const std::string p = small_payload(h, 8);
      const uint32_t id = new_buffer(get_u64(p.data()), 0);
      std::string out;
      put_u32(out, id);
      return reply('O', out);
    }
    case Op::free_buffer: small_payload(h, 0); free_buffer(h.handle); return reply('O', "");
    case Op::write: return write(h);
    case Op::read: return read(h);
    case Op::set_input:
    case Op::set_output_grad: return into_network(h);
    case Op::forward: return forward(h.handle, small_payload(h, kForwardCallBytes));
    case Op::get_output: return get_output(h.handle, small_payload(h, 4));
    case Op::backward: small_payload(h, 0); return backward(h.handle);
  }
}

std::string Session::small_payload(const RequestHeader& h, uint64_t expected) {
  if (h.length != expected)
    throw Error(std::string(op_name(h.op)) + ": a payload of " + std::to_string(h.length) + " bytes, not " +
                std::to_string(expected));
  std::string p(expected, '\0');
  read_into(p.data(), expected);
  return p;
}

void Session::read_into(void* p, uint64_t n) { c_.read(p, n, d_.config().timeout); }

void Session::reply(char kind, const std::string& head, const void* data, uint64_t len) {
  char h[kHeaderBytes];
  encode_reply(h, {kind, head.size() + len});
  c_.write(h, sizeof h, d_.config().timeout);
  c_.write(head.data(), head.size(), d_.config().timeout);
  if (len) c_.write(data, len, d_.config().timeout);
  c_.flush(d_.config().timeout);
}

void Session::hello(const std::string& payload) {
  const uint64_t bits = get_u64(payload.data());
  double fraction = 0;
  std::memcpy(&fraction, &bits, sizeof fraction);
  seat_ = d_.take_seat(fraction);
  reply('O', d_.describe(&seat_).dump());
}

void Session::charge(uint64_t bytes, const std::string& what) {
  if (bytes > seat_.cap_bytes || charged_ > seat_.cap_bytes - bytes)
  {
    char share[32];
    std::snprintf(share, sizeof share, "%.3g", seat_.fraction);
    throw Error(what + " needs " + mib(bytes) + ": over this client's cap of " + mib(seat_.cap_bytes) + " (" + share +
                " of the device's " + mib(d_.config().memory_bytes) + "), " + mib(charged_) + " in use");
  }
  charged_ += bytes;
  peak_ = std::max(peak_, charged_);
}

uint32_t Session::new_buffer(uint64_t bytes, uint32_t owner) {
  if (buffers_.size() + nets_.size() >= kMaxObjects)
    throw Error("alloc: a client may hold at most " + std::to_string(kMaxObjects) + " objects");
  charge(bytes, "a buffer of " + std::to_string(bytes) + " bytes");
  try {
    DeviceMemory::instance().reserve(bytes, "a remote client's buffer");
  } catch (...) {
    charged_ -= bytes;
    throw;
  }
  Buffer b;
  b.bytes = bytes;
  b.owner = owner;
  try {
    b.data.assign(size_t((bytes + 3) / 4), 0.0f);
  } catch (...) {
    DeviceMemory::instance().release(bytes);
    charged_ -= bytes;
    throw;
  }
  const uint32_t id = new_handle();
  buffers_.emplace(id, std::move(b));
  return id;
}

uint32_t Session::new_handle() {
  // Past 2^32 the counter wraps: skip 0 ("none") and the handles still in use (at most
  // kMaxObjects, so this ends).
  for (;;) {
    const uint32_t id = next_handle_++;
    if (id != 0 && !buffers_.count(id) && !nets_.count(id)) return id;
  }
}

void Session::free_buffer(uint32_t id) {
  Buffer& b = buffer(id);
  if (b.owner != 0)
    throw Error("free: buffer " + std::to_string(id) + " belongs to network " + std::to_string(b.owner) +
                ": close the network");
  DeviceMemory::instance().release(b.bytes);
  charged_ -= b.bytes;
  buffers_.erase(id);
}

Session::Staged::Staged(Session& s, uint64_t floats, const char* what) : s_(s), bytes_(floats * 4) {
  s_.charge(bytes_, what);
  try {
    DeviceMemory::instance().reserve(bytes_, what);
  } catch (...) {
    s_.charged_ -= bytes_;
    throw;
  }
  try {
    v_.resize(size_t(floats));
  } catch (...) {
    DeviceMemory::instance().release(bytes_);
    s_.charged_ -= bytes_;
    throw;
  }
}

Session::Staged::~Staged() {
  DeviceMemory::instance().release(bytes_);
  s_.charged_ -= bytes_;
}

Session::Buffer& Session::buffer(uint32_t id) {
  const auto it = buffers_.find(id);
  if (it == buffers_.end()) throw Error("this client has no buffer " + std::to_string(id));
  return it->second;
}

Session::Net& Session::network(uint32_t id) {
  const auto it = nets_.find(id);
  if (it == nets_.end()) throw Error("this client has no network " + std::to_string(id));
  return it->second;
}

void Session::write(const RequestHeader& h) {
  if (h.length < 8) throw Error("write: no offset");
  uint64_t offset = 0;
  {
    char o[8];
    read_into(o, 8);
    offset = get_u64(o);
  }
  const uint64_t len = h.length - 8;
  Buffer& b = buffer(h.handle);
  if (offset > b.bytes || len > b.bytes - offset)
    throw Error("write: bytes " + std::to_string(offset) + "+" + std::to_string(len) + " are outside buffer " +
                std::to_string(h.handle) + " (" + std::to_string(b.bytes) + " bytes)");
  read_into(reinterpret_cast<char*>(b.data.data()) + offset, len);
  if (b.owner) network(b.owner).written = true;
  reply('O', "");
}

void Session::read(const RequestHeader& h) {
  const std::string p = small_payload(h, 16);
  const uint64_t offset = get_u64(p.data()), len = get_u64(p.data() + 8);
  const Buffer& b = buffer(h.handle);
  if (offset > b.bytes || len > b.bytes - offset)
    throw Error("read: bytes " + std::to_string(offset) + "+" + std::to_string(len) + " are outside buffer " +
                std::to_string(h.handle) + " (" + std::to_string(b.bytes) + " bytes)");
  reply('O', "", reinterpret_cast<const char*>(b.data.data()) + offset, len);
}

void Session::open_network(const std::string& payload) {
  std::string why;
  const auto spec = decode_network_spec(payload, &why);
  if (!spec) throw Error(why);
  if (nets_.size() + buffers_.size() + 3 > kMaxObjects) throw Error("open network: too many objects");
  Net n;
  try {
    n.graph = std::make_unique<models::Graph>(
        models::build_model(spec->model, {spec->classes, spec->image_size, spec->aux_logits, -1}));
  } catch (const std::invalid_argument& e) {
    throw Error(std::string("open network: ") + e.what());
  }
  const models::Graph& g = *n.graph;
  // A lower bound, checked before anything is built: the parameters, gradients and state, and
  // the layers' outputs for the batch (training keeps all of them for backward; inference at
  // least the largest).
  uint64_t outputs = 0, largest = 0;
  for (const models::Node& node : g.nodes) {
    outputs += uint64_t(node.out.numel());
    largest = std::max(largest, uint64_t(node.out.numel()));
  }
  const uint64_t floats = g.param_count * (spec->inference_only ? 1 : 2) + g.state_count +
                          uint64_t(spec->batch) * (spec->inference_only ? largest : outputs);
  // Over the cap already: charge() refuses, saying by how much (the buffers charge themselves).
  if (floats * 4 > seat_.cap_bytes - std::min(seat_.cap_bytes, charged_))
    charge(floats * 4, "open network " + spec->model + " batch " + std::to_string(spec->batch));
  const uint32_t id = new_handle();
  try {
    n.params = new_buffer(g.param_count * 4, id);
    n.grads = spec->inference_only ? 0 : new_buffer(g.param_count * 4, id);
    n.state = g.state_count ? new_buffer(g.state_count * 4, id) : 0;
    std::lock_guard lock(d_.build_mutex());  // one build at a time: their transient peaks do not add up
    // The build's own memory (activations, workspaces, reordered weights at bind), counted on
    // this thread whatever other clients allocate meanwhile, and refused past this client's cap
    // as it is made, not after.
    const uint64_t left = std::max<uint64_t>(1, seat_.cap_bytes - std::min(seat_.cap_bytes, charged_));
    DeviceMemoryScope build(left);
    try {
      // The client reads and writes these buffers as the graph lays them out: plain.
      n.net = models::make_network(d_.config().backend, g, int(spec->batch),
                                   {.inference_only = spec->inference_only,
                                    .precision = static_cast<models::Precision>(spec->precision),
                                    .plain_params = true});
      auto ptr = [&](uint32_t b) { return b ? buffer(b).data.data() : nullptr; };
      n.net->bind(ptr(n.params), ptr(n.grads), ptr(n.state));
    } catch (const DeviceOutOfMemory& e) {
      throw Error("open network " + spec->model + " batch " + std::to_string(spec->batch) + ": over this client's cap of " +
                  mib(seat_.cap_bytes) + " (" + mib(left) + " of it left) while building: " + e.what());
    }
    n.bytes = build.bytes();
  } catch (...) {  // no network: its buffers go too, or they would be nobody's to free
    for (uint32_t b : {n.params, n.grads, n.state})
      if (b) {
        buffer(b).owner = 0;
        free_buffer(b);
      }
    throw;
  }
  nets_.emplace(id, std::move(n));
  Net& net = nets_.at(id);
  try {
    charge(net.bytes, "open network " + spec->model + " batch " + std::to_string(spec->batch) + " (its activations)");
  } catch (...) {
    net.bytes = 0;
    close_network(id);
    throw;
  }
  net.net->set_gate(seat_.gate.get());
  std::string out;
  for (uint32_t v : {id, net.params, net.grads, net.state}) put_u32(out, v);
  reply('O', out);
}

void Session::close_network(uint32_t id) {
  Net& n = network(id);
  charged_ -= std::min(charged_, n.bytes);
  const uint32_t owned[] = {n.params, n.grads, n.state};
  nets_.erase(id);
  for (uint32_t b : owned)
    if (b) {
      buffer(b).owner = 0;
      free_buffer(b);
    }
}

void Session::into_network(const RequestHeader& h) {
  Net& n = network(h.handle);
  const models::Graph& g = *n.graph;
  const bool input = h.op == Op::set_input;
  uint32_t index = 0;
  if (!input) {
    char p[8];
    if (h.length < 8) throw Error("set output gradient: no output index");
    read_into(p, 8);
    index = get_u32(p);
    if (index >= g.outputs.size() || get_u32(p + 4) != 0)
      throw Error("set output gradient: the network has no output " + std::to_string(index));
  }
  const uint64_t floats = uint64_t(n.net->batch()) *
                          uint64_t(input ? g.input_dims().numel() : g.output_node(index).out.numel());
  if (h.length != floats * 4 + (input ? 0 : 8))
    throw Error(std::string(op_name(h.op)) + ": " + std::to_string(h.length) + " bytes, not a batch of " +
                std::to_string(floats) + " floats");
  {
    Staged x(*this, floats, input ? "set input's copy of the batch" : "set output gradient's copy of the batch");
    read_into(x.data(), floats * 4);
    if (input) n.net->set_input(x.data());
    else n.net->set_output_grad(index, x.data());
  }  // given back before the answer
  reply('O', "");
}

void Session::forward(uint32_t id, const std::string& payload) {
  std::string why;
  const auto f = decode_forward_call(payload, &why);
  if (!f) throw Error(why);
  Net& n = network(id);
  {
    const models::HoldDevice hold(seat_.gate.get());
    if (n.written) n.net->params_changed();  // an inference network's reordered weights follow
    n.written = false;
    n.net->forward({.training = f->training, .seed = f->seed, .step = f->step, .sample_offset = f->sample_offset});
  }
  reply('O', "");
}

void Session::get_output(uint32_t id, const std::string& payload) {
  Net& n = network(id);
  const uint32_t index = get_u32(payload.data());
  if (index >= n.graph->outputs.size()) throw Error("get output: the network has no output " + std::to_string(index));
  const uint64_t floats = uint64_t(n.net->batch()) * uint64_t(n.graph->output_node(index).out.numel());
  Staged y(*this, floats, "get output's copy of the batch");
  n.net->get_output(index, y.data());
  reply('O', "", y.data(), floats * 4);
}

void Session::backward(uint32_t id) {
  Net& n = network(id);
  if (!n.grads) throw Error("backward: network " + std::to_string(id) + " was opened for inference only");
  const float* grads = buffer(n.grads).data.data();
  {
    GateHold hold(seat_.gate.get());
    n.net->backward([&](int node) {
      const GradChunk c = node_range(*n.graph, node);
      if (!c.count) return;
      // The client may be slow to read: the other clients keep the device meanwhile.
      hold.leave();
      reply('P', encode(c), grads + c.offset, c.count * 4);
      hold.enter();
    });
  }
  reply('O', "");
}

}  // namespace ringbench::remote
