// What every transport of ours shares, whatever its wire: the Request handed to callers over a
// shared request state, rank, size, caps and path, the lock, the first failure (which every
// pending request then fails with), abandoning a request, the checks of a transfer's
// arguments, and the timeout error. TcpTransport and VerbsTransport derive from TransportCore
// and add only their engines. Internal to the collectives library.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/errors.h"
#include "collectives/transport.h"

namespace ringbench::transport_core {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds(Clock::duration d);
std::string fmt_s(double s);  // "1.5 s"

// One posted transfer; each transport extends it with what its engine needs.
struct ReqState {
  enum Status { kPending, kDone, kFailed };
  Status status = kPending;
  std::exception_ptr error;
  int peer = -1;
  bool is_send = false;
  size_t length = 0;
  uint64_t tag = 0;
};

// The error of a transfer that did not complete in time: what it waited for, from whom, and
// whether the peer is alive. `progress` is "" or, for example, " (4096 moved)"; `stalled` says
// the transfer had started.
TimeoutError timeout_error(const std::string& me, const std::string& who, const ReqState& r,
                           milliseconds waited, double heard_s, milliseconds alive_within,
                           const std::string& progress, bool stalled);

template <class State>
class TransportCore : public Transport {
 public:
  using ReqPtr = std::shared_ptr<State>;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const TransportCaps& caps() const override { return caps_; }
  std::map<std::string, std::string> path_info() const override { return path_; }

  virtual bool test(const ReqPtr& r) = 0;
  virtual void wait(const ReqPtr& r, milliseconds timeout) = 0;
  // A request dropped while pending (an exception unwound its owner) would leave the transport
  // using a buffer its owner may free next: the transport fails, which stops all use of caller
  // memory.
  void abandon(const ReqPtr& r) {
    std::lock_guard lk(mu_);
    if (r->status == ReqState::kPending && !fatal_)
      fail(std::make_exception_ptr(IoError(
          r->peer, me() + ": a transfer with " + who(r->peer) + " was abandoned before it completed")));
  }

 protected:
  TransportCore(int rank, int size) : rank_(rank), size_(size) {
    if (size < 1 || rank < 0 || rank >= size)
      throw Error("invalid rank " + std::to_string(rank) + " of " + std::to_string(size));
  }

  std::unique_ptr<Request> make_request(ReqPtr r) { return std::make_unique<CoreRequest>(this, std::move(r)); }
  std::string me() const { return "rank " + std::to_string(rank_); }
  virtual std::string who(int peer) const = 0;
  // The first failure wins; every pending request fails with it. Called with mu_ held.
  virtual void fail(std::exception_ptr e) = 0;

  // A transfer names a peer other than this rank and lies inside its registered buffer.
  void check_args(int peer, const Buffer& buf, size_t offset, size_t length) const {
    if (peer < 0 || peer >= size_ || peer == rank_)
      throw Error(me() + ": invalid peer " + std::to_string(peer) + " (world size " + std::to_string(size_) + ")");
    if (offset > buf.size() || length > buf.size() - offset)
      throw Error(me() + ": transfer [" + std::to_string(offset) + ", +" + std::to_string(length) +
                  ") is outside the registered buffer of " + std::to_string(buf.size()) + " bytes");
  }

  const int rank_, size_;
  TransportCaps caps_;
  std::map<std::string, std::string> path_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::exception_ptr fatal_;

 private:
  class CoreRequest : public Request {
   public:
    CoreRequest(TransportCore* t, ReqPtr s) : t_(t), s_(std::move(s)) {}
    ~CoreRequest() override { t_->abandon(s_); }
    bool test() override { return t_->test(s_); }
    void wait(milliseconds timeout) override { t_->wait(s_, timeout); }

   private:
    TransportCore* t_;
    ReqPtr s_;
  };
};

}  // namespace ringbench::transport_core
