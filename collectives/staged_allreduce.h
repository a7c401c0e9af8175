// An allreduce of CUDA device buffers by a host allreduce: our ring over a transport that moves
// host memory only (TCP, and verbs without GPUDirect: TransportCaps::cuda_memory false), or any
// other (MPI_Allreduce). The data is staged through pinned host memory: device -> pinned copy,
// the host allreduce on the pinned copy, pinned -> device copy, the copies on two streams of
// their own.
//
// Pipelining: a call is cut into pieces of at most `piece_bytes` (the same cut on every rank, it
// depends only on the count). The device->host copies of the first pieces are queued at once;
// while the ring reduces piece k, the copy of piece k+depth arrives and the reduced piece k-1
// is already on its way back (the ring itself pipelines its segments inside each piece). With
// piece_bytes 0 a call is one piece: copy all, reduce all, copy all back.
//
// The pinned buffer mirrors the whole device buffer (offset for offset), is registered with
// the transport once, at construction, and outlives the registration.
//
// Only with RINGBENCH_HAVE_CUDA.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "collectives/allreduce.h"
#include "cuda/memory.h"

namespace ringbench {

struct StagedOptions {
  size_t piece_bytes = 4 << 20;  // 0: one piece per call
  int depth = 4;                 // device->host copies queued ahead of the piece being reduced
};

// The host allreduce of a staged piece: elements [offset, offset + count) of the pinned buffer,
// in place; every rank calls it with the same counts in the same order.
using HostAllreduce = std::function<void(size_t count, size_t offset)>;

class StagedAllreduce {
 public:
  // `device_data` holds max_count elements on the current CUDA device; it is reduced in place,
  // by our allreduce (ring, or the small-message algorithms) over `t`.
  StagedAllreduce(Transport& t, void* device_data, size_t max_count, DType dtype, ReduceOp op,
                  const AllreduceOptions& opts = {}, const StagedOptions& staged = {});
  // ... or by the host allreduce that `make_host` sets up on the pinned buffer (max_count
  // elements of dtype), once, here.
  StagedAllreduce(void* device_data, size_t max_count, DType dtype,
                  const std::function<HostAllreduce(void* pinned)>& make_host,
                  const StagedOptions& staged = {});
  ~StagedAllreduce();
  StagedAllreduce(const StagedAllreduce&) = delete;
  StagedAllreduce& operator=(const StagedAllreduce&) = delete;

  // Allreduces elements [offset, offset + count) in place. The caller makes sure the device
  // data is final before the call (e.g. cudaEventSynchronize on the event recorded after the
  // kernels that wrote it; the results of earlier calls need nothing: they are ordered). Returns once the ring is done; the copies back to the device are
  // then queued on stream(): the result is final once the work queued there has run (record an
  // event on it, or sync()). Every rank passes the same count. Throws the transport's errors.
  void run(size_t count, size_t offset = 0);
  cudaStream_t stream() const { return h2d_.get(); }
  void sync() const { h2d_.sync(); }
  size_t pieces(size_t count) const;  // how many pieces a call of `count` elements is cut into
  std::string describe() const;

 private:
  char* dev_;
  size_t max_count_, esize_, piece_elems_;  // piece_elems_ 0: whole calls
  cuda::PinnedArray<char> staging_;  // before ar_: registered by it, must outlive it
  cuda::Stream d2h_, h2d_;
  std::vector<std::unique_ptr<cuda::Event>> arrived_;  // one per piece in flight, reused
  cuda::Event up_done_;  // the copies back of earlier calls
  std::unique_ptr<Allreduce> ar_;  // after staging_: destroyed first (it registered staging_)
  HostAllreduce reduce_;            // likewise
};

}  // namespace ringbench
