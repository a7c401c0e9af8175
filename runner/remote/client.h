// A client's connection to a device server (`--device remote:HOST:PORT[,fraction=F][,transport=T]`):
// proves the job's secret, asks for the link's transport (tcp, or verbs bootstrapped over the
// TCP connection), takes its fraction of the device, and sends requests one at a time. Every
// byte that crosses is counted, and every request is a round trip. Errors are IoErrors naming
// the server.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "runner/remote/channel.h"
#include "runner/remote/channel_wire.h"
#include "runner/remote/transport_channel.h"
#include "runner/remote/wire.h"

namespace ringbench::remote {

// "remote:HOST:PORT[,fraction=F][,transport=tcp|verbs]".
struct DeviceSpec {
  std::string host;
  int port = 0;
  double fraction = 1.0;
  LinkTransport transport = LinkTransport::tcp;
  std::string text() const;  // host:port
};
bool is_remote_device(const std::string& device);  // starts with "remote:"
// Throws Error naming `option` and what is wrong.
DeviceSpec parse_device_spec(const std::string& device, const std::string& option = "--device");

// The secret a client proves to the device server: RINGBENCH_DEVICE_SECRET (hex) when set, else
// the job's as a rank started by hand reads it (--secret-file, RINGBENCH_SECRET). A launcher of
// ranks passes the user's on in RINGBENCH_DEVICE_SECRET, since its ranks get a job secret of its
// own making. Throws Error when there is none.
std::string device_secret(const std::string& secret_file);
// For a launcher: puts the user's secret into RINGBENCH_DEVICE_SECRET for its ranks.
void pass_device_secret(const std::string& secret_file);

// "17.2 MB", "3.1 kB", "160 B" (decimal units, as link rates are).
std::string bytes_text(uint64_t bytes);

struct Traffic {
  uint64_t sent = 0, received = 0, round_trips = 0;  // bytes with the headers
  Traffic operator-(const Traffic& o) const { return {sent - o.sent, received - o.received, round_trips - o.round_trips}; }
  nlohmann::json to_json() const;
};

// Where backward's 'P' replies go: `where` checks a chunk and says where its floats belong;
// `done` runs once they are there. Each node's chunk is taken once, and at most `max_chunks`
// (the nodes with parameters), so a server cannot keep a backward going.
struct ChunkSink {
  std::function<float*(const GradChunk&)> where;
  std::function<void(const GradChunk&)> done;
  size_t max_chunks = 0;
};
// What to do with the final 'O' reply's payload: append it to `out`, or read exactly
// `into_len` bytes into `into` (neither: it must be empty).
struct ReplyTo {
  std::string* out = nullptr;
  void* into = nullptr;
  uint64_t into_len = 0;
  const ChunkSink* chunks = nullptr;
};

// Reads the replies to one request from `c`, as RemoteDevice::call does: 'P' chunks into
// to.chunks, then the final 'O' as `to` says; throws Error with the server's message on 'E' and
// IoError naming `who` on anything malformed. Adds the bytes read to *received as they come.
void receive_reply(Channel& c, Millis timeout, const std::string& who, Op op, const ReplyTo& to, uint64_t* received);
// The hello answer: the server's device description, or IoError naming `who`.
nlohmann::json parse_device_description(const std::string& answer, const std::string& who);

class RemoteDevice {
 public:
  RemoteDevice(const DeviceSpec& spec, const std::string& secret, std::chrono::milliseconds timeout);
  const DeviceSpec& spec() const { return spec_; }
  const nlohmann::json& device() const { return device_; }  // the server's hello answer
  nlohmann::json link() const;  // transport, addresses, interface; verbs: the RDMA path
  std::string link_text() const;  // "tcp" or "verbs (rxe0, RoCE v2 GID ...)"

  // One request: `head` then `len` bytes of `data`. Throws Error with the server's message on 'E'.
  void call(Op op, uint32_t handle, const std::string& head, const void* data = nullptr, uint64_t len = 0,
            const ReplyTo& to = {});
  Traffic traffic() const;
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  void handshake(int fd, const std::string& secret);
  void choose_transport(int fd);

  DeviceSpec spec_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<SocketChannel> tcp_;  // the connection; verbs: its bootstrap, kept open
  std::unique_ptr<TransportChannel> verbs_;
  Channel* c_ = nullptr;  // what the requests travel on
  nlohmann::json device_;
  mutable std::mutex m_;  // one request at a time; traffic_
  Traffic traffic_;
};

}  // namespace ringbench::remote
