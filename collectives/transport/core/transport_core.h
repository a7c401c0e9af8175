// What every transport of ours shares, whatever its wire: the Request handed to callers over a
// shared request state, rank, size, caps and path, the lock, the first failure (which every
// pending request then fails with), abandoning a request, posting (the checks of a transfer's
// arguments, its state, the failure check), test() and wait() around the engine's progress,
// abort(), and the timeout error. TcpTransport, VerbsTransport and ShmTransport derive from
// TransportCore and add only their engines, through the hooks below. Internal to the
// collectives library.
#pragma once

#include <algorithm>
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
// Wakes whoever polls the eventfd `fd` (it is never drained by this).
void signal_eventfd(int fd);
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
  char* data = nullptr;    // the caller's memory at the transfer's offset (a send only reads it)
  size_t transferred = 0;  // payload bytes moved so far, for timeout messages (tcp, shm)
  RecvSink sink;           // irecv_sink(): the payload goes here, not to `data`
  ForwardFn forward;       // irecv_forward()'s receive: the payload goes on, `data` is home
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

  std::unique_ptr<Request> isend(int peer, const Buffer& buf, size_t offset, size_t length,
                                 uint64_t tag) final {
    return submit(new_request(peer, true, buf, offset, length, tag));
  }
  std::unique_ptr<Request> irecv(int peer, Buffer& buf, size_t offset, size_t length,
                                 uint64_t tag) final {
    return submit(new_request(peer, false, buf, offset, length, tag));
  }
  std::unique_ptr<Request> irecv_sink(int peer, size_t length, uint64_t tag, RecvSink sink) final {
    if (!caps_.recv_sink || !sink)
      throw Error(me() + ": the " + caps_.name + " transport cannot hand a receive to a sink");
    Buffer none(nullptr, length, MemKind::host);
    auto r = new_request(peer, false, none, 0, length, tag);
    r->sink = std::move(sink);
    return submit(std::move(r));
  }
  Forward irecv_forward(int from, int to, size_t length, uint64_t tag, Buffer& home, size_t offset,
                        ForwardFn fn) final {
    if (!caps_.forward || !fn)
      throw Error(me() + ": the " + caps_.name + " transport cannot forward a receive");
    auto send = new_request(to, true, home, offset, length, tag);
    auto r = new_request(from, false, home, offset, length, tag);
    r->forward = std::move(fn);
    std::lock_guard lk(mu_);
    if (fatal_) std::rethrow_exception(fatal_);
    post_forward(r, send);
    return {std::make_unique<CoreRequest>(this, std::move(r)), std::make_unique<CoreRequest>(this, std::move(send))};
  }
  // Fails this transport (unless it failed already) and tells every peer why.
  void abort(const std::string& reason) noexcept final {
    try {
      std::lock_guard lk(mu_);
      if (!fatal_) fail(std::make_exception_ptr(IoError(-1, me() + " aborted: " + reason)));
      publish_abort(reason);
    } catch (...) {
    }
  }

  // A Request's test() and wait(): the engine moves transfers along (advance, await); a failed
  // request throws its failure.
  bool test(const ReqPtr& r) {
    std::lock_guard lk(mu_);
    if (r->status == ReqState::kPending) advance(*r);
    return finished(*r);
  }
  void wait(const ReqPtr& r, milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    std::unique_lock lk(mu_);
    await(lk, *r, deadline);
    if (finished(*r)) return;
    throw timed_out(*r, timeout);
  }
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

  std::string me() const { return "rank " + std::to_string(rank_); }

  // ---- each transport's engine; all but who() and prepare() run with mu_ held ----
  virtual std::string who(int peer) const = 0;
  // The first failure wins; every pending request fails with it.
  virtual void fail(std::exception_ptr e) = 0;
  // What the engine needs of a transfer's buffer beyond `data` (and its own checks of it);
  // before the lock.
  virtual void prepare(State& /*r*/, const Buffer& /*buf*/, size_t /*offset*/) const {}
  // Posts or queues a transfer (the transport has not failed); throws left_job() when the
  // peer has said goodbye.
  virtual void post(const ReqPtr& r) = 0;
  // Posts the two halves of a forward (where caps().forward).
  virtual void post_forward(const ReqPtr& /*recv*/, const ReqPtr& /*send*/) {
    throw Error(me() + ": the " + caps_.name + " transport cannot forward a receive");
  }
  // Moves transfers along for test() of pending `r`, without blocking.
  virtual void advance(State& r) = 0;
  // Returns when `r` is no longer pending or `deadline` has passed.
  virtual void await(std::unique_lock<std::mutex>& lk, State& r, Clock::time_point deadline) = 0;
  // The error of `r`, still pending after waiting `waited`: see timeout_error().
  virtual TimeoutError timed_out(const State& r, milliseconds waited) const = 0;
  // Tells every peer that this rank aborted, and why.
  virtual void publish_abort(const std::string& reason) = 0;

  // ---- closing, with mu_ held ----
  // Requests still pending at close will never be waited for: failing them stops the engine
  // using their buffers.
  void fail_pending_at_close(bool pending) {
    if (pending && !fatal_)
      fail(std::make_exception_ptr(IoError(-1, me() + ": the transport was closed with transfers still pending")));
  }
  // Waits until `said_goodbye` (our goodbyes are out), for at most 5 s (1 s after a failure)
  // and never beyond the transport's `timeout`.
  template <class Pred>
  void await_goodbyes(std::unique_lock<std::mutex>& lk, milliseconds timeout, Pred said_goodbye) {
    const auto limit = std::min<milliseconds>(timeout, std::chrono::seconds(fatal_ ? 1 : 5));
    cv_.wait_for(lk, limit, said_goodbye);
  }

  // A transfer with a peer that has left the job.
  IoError left_job(const State& r) const {
    return IoError(r.peer, me() + ": cannot " + (r.is_send ? "send to " : "receive from ") + who(r.peer) +
                               ": it has left the job");
  }

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
  ReqPtr new_request(int peer, bool is_send, const Buffer& buf, size_t offset, size_t length, uint64_t tag) {
    check_args(peer, buf, offset, length);
    auto r = std::make_shared<State>();
    r->peer = peer;
    r->is_send = is_send;
    r->length = length;
    r->tag = tag;
    r->data = static_cast<char*>(buf.data()) + offset;
    prepare(*r, buf, offset);
    return r;
  }
  std::unique_ptr<Request> submit(ReqPtr r) {
    std::lock_guard lk(mu_);
    if (fatal_) std::rethrow_exception(fatal_);
    post(r);
    return std::make_unique<CoreRequest>(this, std::move(r));
  }
  // Rethrows the failure of a failed request; true when it is done.
  static bool finished(const State& r) {
    if (r.status == ReqState::kFailed) std::rethrow_exception(r.error);
    return r.status == ReqState::kDone;
  }

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
