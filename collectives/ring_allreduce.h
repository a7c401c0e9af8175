// Our ring allreduce (Horovod/Baidu style): reduce-scatter then allgather over the ring
// rank -> rank+1, written only against the Transport contract. Each rank's share (chunk) is
// split into segments that are pipelined: while segment k is being reduced, segment k+1 is
// arriving and the reduced segment k-1 is already on its way to the next rank.
//
// Setup (constructor) registers the buffers and allocates the receive slots (none where the
// transport offers irecv_sink: it then reduces each segment where it holds it, as it arrives;
// where it also offers irecv_forward, each segment goes on to the next rank as it arrives);
// run() is the hot loop and the only code a benchmark should time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/dtype.h"
#include "collectives/transport.h"

namespace ringbench {

struct RingOptions {
  // Pipeline granularity: each chunk is cut into at least `segments_per_chunk` segments of
  // at most `segment_bytes`, but not below `min_segment_bytes` (unless segment_bytes is). Over a
  // forwarding transport, segments are what it asks for (caps().forward_bytes), at most
  // `segment_bytes`, and the buffer goes round in rounds of one segment per chunk.
  size_t segment_bytes = 1 << 20;
  size_t min_segment_bytes = 64 << 10;
  size_t segments_per_chunk = 4;
  int depth = 4;                   // receives posted ahead of the one being reduced
  std::chrono::milliseconds timeout{60000};  // limit on any single wait
};

class RingAllreduce {
 public:
  // `in` and `out` hold `max_count` elements each; in == out means in-place.
  RingAllreduce(Transport& t, const void* in, void* out, size_t max_count, DType dtype,
                ReduceOp op, RingOptions opts = {});
  // Allreduces elements [offset, offset + count) (within max_count). All ranks must pass the
  // same count, dtype, op and segment size; a disagreement is an IoError on every rank. A
  // nonzero offset lets one ring serve every gradient bucket of a flat buffer.
  void run(size_t count, size_t offset = 0);
  // The receive slots one set up for `max_count` elements allocates (none over a transport that
  // reduces from its own memory, which this upper bound does not know of).
  static size_t scratch_bytes(size_t max_count, size_t esize, int ranks, const RingOptions& opts);

 private:
  struct Range {
    size_t begin, end;  // elements
  };
  Range chunk(size_t count, int c) const;
  size_t segments(Range r) const;
  Range segment(Range r, size_t k) const;
  void run_ring(size_t count, size_t offset, uint64_t tag);
  void run_forwarding(size_t count, size_t offset, uint64_t tag);

  Transport& t_;
  const void* in_;
  void* out_;
  size_t max_count_;
  DType dtype_;
  ReduceOp op_;
  RingOptions opts_;
  size_t esize_, max_seg_elems_, seg_elems_ = 1;  // seg_elems_: this run's segment
  std::vector<char> slots_;
  std::unique_ptr<Buffer> in_buf_, out_buf_, slot_buf_;
  uint64_t runs_ = 0;
};

}  // namespace ringbench
