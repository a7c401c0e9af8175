#include "collectives/staged_allreduce.h"

#include <algorithm>
#include <string>

#include "base/errors.h"

namespace ringbench {

// Why always staged, even if a transport declared cuda_memory (none does yet): the ring
// reduces each received segment with the CPU kernels of collectives/reduce.h, so its data must
// be host memory whatever the transport can move. A transport with GPUDirect would need the
// ring to reduce with device kernels first; until then such a transport is staged like TCP.
StagedAllreduce::StagedAllreduce(void* device_data, size_t max_count, DType dtype,
                                 const std::function<HostAllreduce(void* pinned)>& make_host,
                                 const StagedOptions& staged)
    : dev_(static_cast<char*>(device_data)), max_count_(max_count), esize_(dtype_size(dtype)),
      piece_elems_(staged.piece_bytes / esize_), staging_(std::max<size_t>(max_count * esize_, 1)) {
  if (staged.piece_bytes && !piece_elems_)
    throw Error("staged allreduce: a piece must hold at least one element, got " +
                std::to_string(staged.piece_bytes) + " bytes");
  if (staged.depth < 1) throw Error("staged allreduce: depth must be >= 1");
  for (int i = 0; i < staged.depth; ++i) arrived_.push_back(std::make_unique<cuda::Event>());
  reduce_ = make_host(staging_.data());
}

StagedAllreduce::StagedAllreduce(Transport& t, void* device_data, size_t max_count, DType dtype,
                                 ReduceOp op, const AllreduceOptions& opts,
                                 const StagedOptions& staged)
    : StagedAllreduce(device_data, max_count, dtype, [&](void* pinned) -> HostAllreduce {
        if (!t.caps().host_memory)
          throw Error("staged allreduce: the " + t.caps().name + " transport cannot move host memory");
        // Registers the pinned buffer (in place: in == out) with the transport, once.
        ar_ = std::make_unique<Allreduce>(t, pinned, pinned, max_count, dtype, op, opts);
        return [this](size_t count, size_t offset) { ar_->run(count, offset); };
      }, staged) {}

StagedAllreduce::~StagedAllreduce() {
  // Copies may still be in flight after a failed run: let them finish before the pinned memory
  // goes (cudaFreeHost would wait too; this makes it explicit). Errors here are not reported.
  cuda::sync_quietly(d2h_.get());
  cuda::sync_quietly(h2d_.get());
}

size_t StagedAllreduce::pieces(size_t count) const {
  if (!piece_elems_ || count <= piece_elems_) return 1;
  return (count + piece_elems_ - 1) / piece_elems_;
}

std::string StagedAllreduce::describe() const {
  return "staged through pinned host memory (pieces of " +
         (piece_elems_ ? std::to_string(piece_elems_ * esize_) + " B, copies overlapping the ring"
                       : std::string("a whole bucket")) +
         ")";
}

void StagedAllreduce::run(size_t count, size_t offset) {
  if (count > max_count_ || offset > max_count_ - count)
    throw Error("staged allreduce of elements [" + std::to_string(offset) + ", " +
                std::to_string(offset + count) + ") exceeds the " + std::to_string(max_count_) +
                " it was set up for");
  const size_t n = pieces(count), per = n == 1 ? count : piece_elems_;
  const size_t depth = arrived_.size();
  auto range = [&](size_t k) {  // elements of piece k
    const size_t b = offset + k * per;
    return std::pair{b, std::min(offset + count, b + per) - b};
  };
  auto queue_down = [&](size_t k) {
    const auto [b, c] = range(k);
    if (c)
      RB_CUDA(cudaMemcpyAsync(staging_.data() + b * esize_, dev_ + b * esize_, c * esize_,
                              cudaMemcpyDeviceToHost, d2h_.get()));
    arrived_[k % depth]->record(d2h_.get());
  };
  // Copies down of this call start after the copies back of earlier calls: a range reduced
  // before is read back only once it is back on the device, and pinned bytes still being copied
  // up are never overwritten.
  up_done_.record(h2d_.get());
  up_done_.wait_on(d2h_.get());
  size_t queued = 0;
  for (; queued < std::min(n, depth); ++queued) queue_down(queued);
  for (size_t k = 0; k < n; ++k) {
    arrived_[k % depth]->sync();
    const auto [b, c] = range(k);
    // Every rank runs every piece, even an empty one (count 0): the ranks stay in step.
    reduce_(c, b);
    if (c)
      RB_CUDA(cudaMemcpyAsync(dev_ + b * esize_, staging_.data() + b * esize_, c * esize_,
                              cudaMemcpyHostToDevice, h2d_.get()));
    // Piece k's event is free again (synced above): reuse it for the piece `depth` ahead.
    if (queued < n) queue_down(queued++);
  }
}

}  // namespace ringbench
