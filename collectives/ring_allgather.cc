#include "collectives/ring_allgather.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/errors.h"
#include "collectives/tag.h"

namespace ringbench {

size_t ring_segment_elems(size_t elems, size_t esize, const RingOptions& o) {
  const size_t max_seg = std::max<size_t>(1, o.segment_bytes / esize);
  const size_t min_seg = std::clamp<size_t>(o.min_segment_bytes / esize, 1, max_seg);
  return std::clamp((elems + o.segments_per_chunk - 1) / o.segments_per_chunk, min_seg, max_seg);
}

RingAllgather::RingAllgather(Transport& t, const void* in, void* out, size_t max_block, DType dtype,
                             RingOptions opts)
    : t_(t), max_block_(max_block), dtype_(dtype), opts_(opts),
      bufs_(t, in, max_block, out, max_block * static_cast<size_t>(t.size()), 0, dtype_size(dtype)) {
  if (opts_.segment_bytes < dtype_size(dtype)) throw Error("segment size must be at least one element");
  if (opts_.depth < 1) throw Error("pipeline depth must be >= 1");
}

void RingAllgather::run(size_t block) {
  if (block > max_block_)
    throw Error("allgather of " + std::to_string(block) + " elements per rank exceeds the " +
                std::to_string(max_block_) + " it was set up for");
  const size_t es = bufs_.esize(), mine = static_cast<size_t>(t_.rank()) * block * es;
  if (bufs_.in() != bufs_.out() && block) std::memcpy(bufs_.out() + mine, bufs_.in(), block * es);
  if (t_.size() == 1) return;
  const uint64_t tag =
      collective_tag({0xa119a7U, block, uint64_t(dtype_), ring_segment_elems(block, es, opts_), runs_++});
  run_collective(t_, [&] { run_ring(block, tag); },
                 [&] { return "allgather (ring) of " + std::to_string(block) + " x " + dtype_name(dtype_) + " per rank"; });
}

// At step s this rank receives block r-s-1 from the left, straight into its place, and passes it
// on at step s+1; at step 0 it sends its own block.
void RingAllgather::run_ring(size_t block, uint64_t tag) {
  const int n = t_.size(), r = t_.rank();
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const size_t es = bufs_.esize(), seg = ring_segment_elems(block, es, opts_);
  auto span = [&](int b) {
    const size_t first = static_cast<size_t>((b % n + n) % n) * block;
    return Span{first, first + block};
  };
  Buffer& out = bufs_.out_buf();
  std::vector<std::unique_ptr<Request>> sends;
  auto send = [&](Span s) { sends.push_back(t_.isend(right, out, s.begin * es, s.size() * es, tag)); };
  struct Item {
    int step;
    Span seg;
  };
  std::vector<Item> items;
  for (int s = 0; s + 1 < n; ++s)
    for (size_t k = 0, m = segment_count(span(r - s - 1), seg); k < m; ++k)
      items.push_back({s, segment_of(span(r - s - 1), seg, k)});
  std::vector<std::unique_ptr<Request>> recvs(items.size());
  const size_t window = 2 * static_cast<size_t>(opts_.depth);
  auto post = [&](size_t i) { recvs[i] = t_.irecv(left, out, items[i].seg.begin * es, items[i].seg.size() * es, tag); };
  for (size_t i = 0; i < items.size() && i < window; ++i) post(i);
  for (size_t k = 0, m = segment_count(span(r), seg); k < m; ++k) send(segment_of(span(r), seg, k));
  for (size_t i = 0; i < items.size(); ++i) {
    recvs[i]->wait(opts_.timeout);
    recvs[i].reset();
    if (i + window < items.size()) post(i + window);
    if (items[i].step + 2 < n) send(items[i].seg);
  }
  for (auto& q : sends) q->wait(opts_.timeout);
}

}  // namespace ringbench
