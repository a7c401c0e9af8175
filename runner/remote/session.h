// One client of a device server: its seat on the device (memory cap, VM) and the objects it
// made there (buffers and networks), in a table of its own, so a handle of another client's
// object names nothing here. Serves the wire protocol (wire.h) until the client leaves.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/graph.h"
#include "models/network.h"
#include "runner/remote/channel.h"
#include "runner/remote/device.h"
#include "runner/remote/wire.h"

namespace ringbench::remote {

class Session {
 public:
  Session(Device& d, Channel& c);
  ~Session();  // frees every object and gives the seat back
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Serves requests until the client ends the connection between two requests (returns a line
  // saying so, with what it held), or until an error (an invalid request, a cap, a client that
  // vanished or fell silent): throws, after answering 'E' where the connection still works.
  std::string serve();
  uint64_t charged_bytes() const { return charged_; }

 private:
  struct Buffer {
    std::vector<float> data;  // zeroed when made: nothing of another object's shows through
    uint64_t bytes = 0;
    uint32_t owner = 0;  // the network whose parameters, gradients or state it is (0: none)
  };
  struct Net {
    std::unique_ptr<models::Graph> graph;
    std::unique_ptr<models::Network> net;
    uint32_t params = 0, grads = 0, state = 0;
    uint64_t bytes = 0;  // the network's own memory (activations, workspaces), measured
    bool written = false;  // its parameters or state were written: params_changed() before forward
  };

  // A request's host copy of a batch (set input or output gradient, get output): charged to
  // the client's cap and to the device's memory while it lives.
  class Staged {
   public:
    Staged(Session& s, uint64_t floats, const char* what);
    ~Staged();
    Staged(const Staged&) = delete;
    Staged& operator=(const Staged&) = delete;
    float* data() { return v_.data(); }

   private:
    Session& s_;
    uint64_t bytes_;
    std::vector<float> v_;
  };

  void handle(const RequestHeader& h);
  std::string small_payload(const RequestHeader& h, uint64_t expected);
  void reply(char kind, const std::string& head, const void* data = nullptr, uint64_t len = 0);
  void hello(const std::string& payload);
  void open_network(const std::string& payload);
  void close_network(uint32_t id);
  void write(const RequestHeader& h);
  void read(const RequestHeader& h);
  void into_network(const RequestHeader& h);  // set input, set output gradient
  void forward(uint32_t id, const std::string& payload);
  void get_output(uint32_t id, const std::string& payload);
  void backward(uint32_t id);
  uint32_t new_buffer(uint64_t bytes, uint32_t owner);
  uint32_t new_handle();  // unused and not 0
  void free_buffer(uint32_t id);
  void charge(uint64_t bytes, const std::string& what);
  Buffer& buffer(uint32_t id);
  Net& network(uint32_t id);
  void read_into(void* p, uint64_t n);

  Device& d_;
  Channel& c_;
  Seat seat_;
  uint64_t charged_ = 0, peak_ = 0;
  uint32_t next_handle_ = 1;
  std::map<uint32_t, Buffer> buffers_;
  std::map<uint32_t, Net> nets_;
  uint64_t requests_ = 0;
};

}  // namespace ringbench::remote
