#include "collectives/chain_broadcast.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/errors.h"
#include "collectives/ring_allgather.h"
#include "collectives/tag.h"

namespace ringbench {

ChainBroadcast::ChainBroadcast(Transport& t, const void* in, void* out, size_t max_count, DType dtype,
                               RingOptions opts)
    : t_(t), max_count_(max_count), dtype_(dtype), opts_(opts),
      bufs_(t, in, max_count, out, max_count, 0, dtype_size(dtype)) {
  if (opts_.segment_bytes < dtype_size(dtype)) throw Error("segment size must be at least one element");
  if (opts_.depth < 1) throw Error("pipeline depth must be >= 1");
}

void ChainBroadcast::run(size_t count) {
  if (count > max_count_)
    throw Error("broadcast of " + std::to_string(count) + " elements exceeds the " + std::to_string(max_count_) +
                " it was set up for");
  if (t_.rank() == 0 && bufs_.in() != bufs_.out() && count)
    std::memcpy(bufs_.out(), bufs_.in(), count * bufs_.esize());
  if (t_.size() == 1) return;
  const uint64_t tag = collective_tag({0xbcU, count, uint64_t(dtype_), runs_++});
  run_collective(t_, [&] { run_chain(count, tag); },
                 [&] { return "broadcast (chain from rank 0) of " + std::to_string(count) + " x " + dtype_name(dtype_); });
}

void ChainBroadcast::run_chain(size_t count, uint64_t tag) {
  const int n = t_.size(), r = t_.rank();
  const size_t es = bufs_.esize();
  // Segments of about an eighth of the message: the chain's n-2 extra segment times stay small.
  RingOptions eighths = opts_;
  eighths.segments_per_chunk = 8;
  const size_t seg = ring_segment_elems(count, es, eighths);
  const Span all{0, count};
  const size_t segs = segment_count(all, seg);
  std::vector<std::unique_ptr<Request>> sends;
  if (r == 0) {
    Buffer& from = bufs_.in_buf();  // in place, the input is the output
    for (size_t k = 0; k < segs; ++k) {
      const Span s = segment_of(all, seg, k);
      sends.push_back(t_.isend(1, from, s.begin * es, s.size() * es, tag));
    }
  } else {
    Buffer& out = bufs_.out_buf();
    std::vector<std::unique_ptr<Request>> recvs(segs);
    const size_t window = 2 * static_cast<size_t>(opts_.depth);
    auto post = [&](size_t k) {
      const Span s = segment_of(all, seg, k);
      recvs[k] = t_.irecv(r - 1, out, s.begin * es, s.size() * es, tag);
    };
    for (size_t k = 0; k < segs && k < window; ++k) post(k);
    for (size_t k = 0; k < segs; ++k) {
      recvs[k]->wait(opts_.timeout);
      recvs[k].reset();
      if (k + window < segs) post(k + window);
      const Span s = segment_of(all, seg, k);
      if (r + 1 < n) sends.push_back(t_.isend(r + 1, out, s.begin * es, s.size() * es, tag));
    }
  }
  for (auto& q : sends) q->wait(opts_.timeout);
}

}  // namespace ringbench
