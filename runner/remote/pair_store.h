// The rendezvous store (collectives/store.h) of a device link's verbs bootstrap: the two ends of
// one TCP connection that has already proved the job's secret, so that the queue pairs' addresses
// travel only between authenticated peers. Each end's sets go to the other; the server keeps the
// counters (add), answering the client's adds in turn. Every frame is checked (channel_wire.h)
// before use, at most kMaxBootFrames are read, and every wait has a deadline. Errors are IoErrors
// naming the peer.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "collectives/net.h"
#include "collectives/store.h"
#include "runner/remote/channel_wire.h"

namespace ringbench::remote {

class PairStore final : public Store {
 public:
  // `fd`: the connected socket (not owned); `timeout` bounds set() and add(), which take none.
  PairStore(int fd, bool server, std::string peer, Millis timeout);
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string describe() const override { return "the TCP connection to " + peer_; }

 private:
  BootFrame read_frame(net::Clock::time_point deadline);
  void send(const BootFrame& f, net::Clock::time_point deadline);
  // Takes a frame that is not the one awaited: stores a set, answers an add (server).
  void take(const BootFrame& f, net::Clock::time_point deadline);
  int64_t count(const std::string& key, int64_t delta);

  int fd_;
  bool server_;
  std::string peer_;
  Millis timeout_;
  std::map<std::string, Bytes> kv_;
  std::map<std::string, int64_t> counters_;  // the server's
  int frames_ = 0;
};

}  // namespace ringbench::remote
