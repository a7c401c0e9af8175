// NCCL, the baseline: a communicator bootstrapped through our rendezvous store, every wait
// bounded. NCCL's own calls can block forever when a peer dies (ncclCommInitRank waits for all
// ranks, a collective's kernel spins on a peer's data), so the communicator is created
// non-blocking (ncclConfig_t::blocking = 0) and everything is polled against a deadline
// together with ncclCommGetAsyncError; on an error or at the deadline the communicator is
// aborted (ncclCommAbort, which also stops its kernels) and an exception says what happened.
//
// Only with RINGBENCH_HAVE_NCCL.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "collectives/dtype.h"
#include "collectives/store.h"
#include "cuda/memory.h"

namespace ringbench {

std::string nccl_version();  // of the library loaded at run time: "2.28.9"

class NcclComm {
 public:
  // Rank 0 makes the unique id (ncclGetUniqueId) and publishes it in `store` under `key`; the
  // others wait for it at most `timeout`. Every rank then joins on the current CUDA device
  // (ncclCommInitRankConfig, non-blocking) and waits until the communicator is ready, at most
  // `timeout` from the start: a missing or dead rank is a TimeoutError, not a hang. `timeout`
  // also bounds every later collective.
  NcclComm(Store& store, const std::string& key, int rank, int size, std::chrono::milliseconds timeout);
  // Finalizes and destroys the communicator (bounded: aborted if that does not finish in time),
  // or aborts it when it failed.
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // Allreduces `count` elements of `in` into `out` (device pointers; in == out is in place) on
  // `stream` and returns once the result is final on the device. `avg` is a sum and then a
  // division by the world size (exact where the sum is; NCCL's ncclAvg premultiplies). An error
  // (this rank's, an asynchronous one such as a dead peer, or the deadline) aborts the
  // communicator and throws IoError / TimeoutError; it cannot be used after that.
  void allreduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op, cudaStream_t stream);
  // The other collectives, bounded and failing the same way, each returning once its result is
  // final. NCCL's in-place layouts: allgather's input at out + rank x block, reducescatter's
  // output at in + rank x block. `block`: elements per rank.
  void allgather(const void* in, void* out, size_t block, DType dtype, cudaStream_t stream);
  void reducescatter(const void* in, void* out, size_t block, DType dtype, ReduceOp op, cudaStream_t stream);
  void broadcast(const void* in, void* out, size_t count, DType dtype, int root, cudaStream_t stream);
  // Block p of `in` to rank p, block p of `out` from rank p: a group of ncclSend and ncclRecv
  // with every rank, itself included (as nccl-tests' alltoall). Out of place only: NCCL reads
  // `in` while it writes `out`.
  void alltoall(const void* in, void* out, size_t block, DType dtype, cudaStream_t stream);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  // transport=nccl, nccl version, CUDA device and its PCI bus id, NCCL_* environment.
  std::map<std::string, std::string> path_info() const;

 private:
  using Clock = std::chrono::steady_clock;
  // Polls until the communicator is no longer in progress; throws (after aborting) on an error
  // or when `deadline` passes. `what` names the operation in the message.
  void wait_ready(const std::string& what, Clock::time_point deadline);
  // Queues a call on `stream` through `enqueue` (which returns NCCL's result) and then `then`
  // (may be empty: what runs after it on the stream, e.g. avg's division), and waits until all of
  // it has run: `what` names the call in errors.
  void complete(const std::string& what, const std::function<ncclResult_t()>& enqueue,
                const std::function<void()>& then, cudaStream_t stream);
  [[noreturn]] void fail(const std::string& what, ncclResult_t r);
  void abort() noexcept;

  int rank_, size_, device_ = 0;
  std::chrono::milliseconds timeout_;
  ncclComm_t comm_ = nullptr;
  bool failed_ = false;
  cuda::Event done_;
};

}  // namespace ringbench
