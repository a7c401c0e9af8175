// Rendezvous: a tiny key-value store the ranks use to exchange addresses before connecting
// (as in Gloo). Values are byte strings; get() waits for a key with a timeout. Three kinds:
//   InProcStore  - threads of one process (tests)
//   TcpStore     - client of a TcpStoreServer (multi-process and multi-node runs)
//   MPI          - when launched by mpirun, rank 0 hosts a TcpStoreServer and broadcasts its
//                  address and the job's secret with MPI (see runner/job/world.cc); MPI never
//                  carries our data.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ringbench {

using Bytes = std::string;  // byte string; may hold any byte value
using Millis = std::chrono::milliseconds;

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits until `key` is set; throws KeyTimeoutError naming the key after `timeout` (the store
  // answered: nobody set it in time), or another error when the store itself fails.
  virtual Bytes get(const std::string& key, Millis timeout) = 0;
  // Adds `delta` to the integer counter `key` (created at 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // A short description for metadata ("inproc", "tcp://10.0.0.1:29500").
  virtual std::string describe() const = 0;
};

// Every rank calls this with the same `name`; returns when all `size` ranks have arrived.
void store_barrier(Store& store, const std::string& name, int size, Millis timeout);

class InProcStore : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string describe() const override { return "inproc"; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Bytes> kv_;
};

// Serves a store over TCP from a background thread. Binds `addr:port` (port 0 = ephemeral).
// Construct it from an already-listening socket (listen_fd >= 0) when the socket had to be
// created before fork(). Only clients that prove they know `secret` (collectives/auth.h) are
// served; an empty secret is a key of zero bytes, for loopback jobs started by hand without one.
class TcpStoreServer {
 public:
  TcpStoreServer(const std::string& addr, int port, const std::string& secret);
  TcpStoreServer(int listen_fd, const std::string& secret);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const { return port_; }
  // Waits until every client has disconnected (or `timeout` passes; returns false then), so
  // that a rank hosting the store does not pull it away from ranks still using it.
  bool linger(Millis timeout);
  // Connections closed without effect because they did not prove they know the secret.
  int rejected() const { return rejected_; }

 private:
  void serve();
  std::atomic<int> clients_{0};
  std::atomic<int> rejected_{0};
  std::string secret_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

class TcpStore : public Store {
 public:
  // Connects to host:port, retrying until `timeout` (the server may not be up yet), and
  // authenticates both ways with `secret`: a server without it, or one that rejects ours, is
  // an IoError at once.
  TcpStore(const std::string& host, int port, Millis timeout, const std::string& secret);
  ~TcpStore() override;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string describe() const override;
  // Local IPv4 address of the connection to the server: the interface that reaches rank 0,
  // a sensible default address for this rank to advertise to its peers.
  std::string local_address() const;

 private:
  Bytes request(char op, const std::string& key, const Bytes& value, Millis timeout);
  std::string authenticate(const std::string& secret, std::chrono::steady_clock::time_point deadline);
  std::mutex mu_;
  int fd_ = -1;
  std::string host_;
  int port_;
};

// Parses "host:port"; throws Error on malformed input.
std::pair<std::string, int> parse_host_port(const std::string& s);

}  // namespace ringbench
