#include "collectives/ring_reducescatter.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/errors.h"
#include "collectives/reduce.h"
#include "collectives/ring_allgather.h"
#include "collectives/tag.h"

namespace ringbench {

namespace {
// The scratch holds the partial sums this rank passes on, one block per step but the last
// (n-2 blocks: none at N = 2), and then the receive slots.
size_t slot_elems(size_t max_block, size_t esize, const RingOptions& o) {
  return std::min(std::max<size_t>(1, o.segment_bytes / esize), std::max<size_t>(1, max_block));
}
}  // namespace

size_t RingReduceScatter::scratch_bytes(size_t max_block, size_t esize, int ranks, const RingOptions& opts) {
  if (ranks < 2) return 0;
  return (max_block * static_cast<size_t>(ranks - 2) + static_cast<size_t>(opts.depth) * slot_elems(max_block, esize, opts)) *
         esize;
}

RingReduceScatter::RingReduceScatter(Transport& t, const void* in, void* out, size_t max_block, DType dtype,
                                     ReduceOp op, RingOptions opts)
    : t_(t), max_block_(max_block), dtype_(dtype), op_(op), opts_(opts),
      slot_elems_(slot_elems(max_block, dtype_size(dtype), opts)),
      bufs_(t, in, max_block * static_cast<size_t>(t.size()), out, max_block,
            scratch_bytes(max_block, dtype_size(dtype), t.size(), opts) / dtype_size(dtype), dtype_size(dtype)) {
  if (opts_.segment_bytes < dtype_size(dtype)) throw Error("segment size must be at least one element");
  if (opts_.depth < 1) throw Error("pipeline depth must be >= 1");
}

void RingReduceScatter::run(size_t block) {
  if (block > max_block_)
    throw Error("reduce-scatter of " + std::to_string(block) + " elements per rank exceeds the " +
                std::to_string(max_block_) + " it was set up for");
  if (t_.size() == 1) {
    if (bufs_.in() != bufs_.out() && block) std::memcpy(bufs_.out(), bufs_.in(), block * bufs_.esize());
    return;  // the sum and the average of one rank are its input
  }
  const size_t seg = ring_segment_elems(block, bufs_.esize(), opts_);
  const uint64_t tag = collective_tag({0x5ca7U, block, uint64_t(dtype_), uint64_t(op_), seg, runs_++});
  run_collective(t_, [&] { run_ring(block, tag); }, [&] {
    return "reduce-scatter (ring) of " + std::to_string(block) + " x " + dtype_name(dtype_) + " per rank (" +
           op_name(op_) + ")";
  });
}

// At step s this rank receives the partial sum of block r-s-2 from the left, adds its own block
// into the scratch's block s and sends it on from there; the last step (n-2) receives block r,
// whose sum is this rank's result.
void RingReduceScatter::run_ring(size_t block, uint64_t tag) {
  const int n = t_.size(), r = t_.rank();
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const size_t es = bufs_.esize(), seg = std::min(ring_segment_elems(block, es, opts_), slot_elems_);
  const size_t slots_at = static_cast<size_t>(n - 2) * max_block_;  // in the scratch, after the partial sums
  const size_t depth = static_cast<size_t>(opts_.depth);
  auto span = [&](int b) {
    const size_t first = static_cast<size_t>((b % n + n) % n) * block;
    return Span{first, first + block};
  };
  const bool inplace = bufs_.in() == bufs_.out();
  char* result = bufs_.out() + (inplace ? static_cast<size_t>(r) * block * es : 0);
  std::vector<std::unique_ptr<Request>> sends;
  struct Item {
    int step;
    Span seg;
  };
  std::vector<Item> items;
  for (int s = 0; s + 1 < n; ++s)
    for (size_t k = 0, m = segment_count(span(r - s - 2), seg); k < m; ++k)
      items.push_back({s, segment_of(span(r - s - 2), seg, k)});
  std::vector<std::unique_ptr<Request>> recvs(items.size());
  auto post = [&](size_t i) {
    recvs[i] = t_.irecv(left, bufs_.scratch_buf(), (slots_at + (i % depth) * seg) * es, items[i].seg.size() * es, tag);
  };
  for (size_t i = 0; i < items.size() && i < depth; ++i) post(i);
  for (size_t k = 0, m = segment_count(span(r - 1), seg); k < m; ++k) {
    const Span s = segment_of(span(r - 1), seg, k);
    sends.push_back(t_.isend(right, bufs_.in_buf(), s.begin * es, s.size() * es, tag));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    recvs[i]->wait(opts_.timeout);
    recvs[i].reset();
    const Span s = items[i].seg;
    const char* slot = bufs_.scratch() + (slots_at + (i % depth) * seg) * es;
    const char* mine = bufs_.in() + s.begin * es;
    if (items[i].step + 2 < n) {
      const size_t partial = static_cast<size_t>(items[i].step) * block + (s.begin - span(r - items[i].step - 2).begin);
      reduce_sum(dtype_, bufs_.scratch() + partial * es, mine, slot, s.size());
      sends.push_back(t_.isend(right, bufs_.scratch_buf(), partial * es, s.size() * es, tag));
    } else {
      char* dst = result + (s.begin - span(r).begin) * es;
      if (op_ == ReduceOp::avg)
        reduce_sum_div(dtype_, dst, mine, slot, s.size(), static_cast<float>(n));
      else
        reduce_sum(dtype_, dst, mine, slot, s.size());
    }
    if (i + depth < items.size()) post(i + depth);
  }
  for (auto& q : sends) q->wait(opts_.timeout);
}

}  // namespace ringbench
