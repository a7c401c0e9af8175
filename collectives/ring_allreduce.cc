#include "collectives/ring_allreduce.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <string>

#include "base/errors.h"
#include "collectives/reduce.h"
#include "collectives/stream_reduce.h"
#include "collectives/tag.h"

namespace ringbench {
size_t RingAllreduce::scratch_bytes(size_t max_count, size_t esize, int ranks, const RingOptions& opts) {
  if (ranks < 2) return 0;
  const size_t n = static_cast<size_t>(ranks);
  return static_cast<size_t>(opts.depth) * std::min(opts.segment_bytes / esize, (max_count + n - 1) / n) * esize;
}

RingAllreduce::RingAllreduce(Transport& t, const void* in, void* out, size_t max_count,
                             DType dtype, ReduceOp op, RingOptions opts)
    : t_(t), in_(in), out_(out), max_count_(max_count), dtype_(dtype), op_(op), opts_(opts),
      esize_(dtype_size(dtype)) {
  if (opts_.segment_bytes < esize_)
    throw Error("segment size must be at least one element (" + std::to_string(esize_) +
                " bytes), got " + std::to_string(opts_.segment_bytes));
  if (opts_.depth < 1) throw Error("pipeline depth must be >= 1");
  if (opts_.segments_per_chunk < 1) throw Error("segments per chunk must be >= 1");
  max_seg_elems_ = opts_.segment_bytes / esize_;
  const size_t bytes = max_count * esize_;
  if (t.size() > 1) {
    in_buf_ = t.register_buffer(const_cast<void*>(in), bytes);
    out_buf_ = in == out ? nullptr : t.register_buffer(out, bytes);
    if (t.caps().recv_sink) return;  // the transport reduces straight out of its memory: no slots
    // A segment never exceeds a chunk, so small rings need only small slots.
    const size_t n = static_cast<size_t>(t.size());
    size_t slot_elems = std::min(max_seg_elems_, (max_count + n - 1) / n);
    slots_.resize(static_cast<size_t>(opts_.depth) * slot_elems * esize_);  // as scratch_bytes() counts
    slot_buf_ = t.register_buffer(slots_.data(), slots_.size());
  }
}

// Chunk c of n: counts differ by at most one element, the first count % n chunks get one more.
RingAllreduce::Range RingAllreduce::chunk(size_t count, int c) const {
  const size_t n = static_cast<size_t>(t_.size()), i = static_cast<size_t>(c);
  const size_t base = count / n, extra = count % n;
  size_t begin = i * base + std::min(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

// Every chunk has at least one (possibly empty) segment, so every step sends a message and a
// rank that disagrees on the count is always caught by the tag check, even for count 0.
size_t RingAllreduce::segments(Range r) const {
  return std::max<size_t>(1, (r.end - r.begin + seg_elems_ - 1) / seg_elems_);
}

RingAllreduce::Range RingAllreduce::segment(Range r, size_t k) const {
  size_t b = std::min(r.end, r.begin + k * seg_elems_);
  return {b, std::min(r.end, b + seg_elems_)};
}

void RingAllreduce::run(size_t count, size_t offset) {
  if (count > max_count_ || offset > max_count_ - count)
    throw Error("allreduce of elements [" + std::to_string(offset) + ", " +
                std::to_string(offset + count) + ") exceeds the " + std::to_string(max_count_) +
                " this ring was set up for");
  const int n = t_.size();
  if (n == 1) {
    if (in_ != out_ && count)
      std::memmove(static_cast<char*>(out_) + offset * esize_,
                   static_cast<const char*>(in_) + offset * esize_, count * esize_);
    return;  // the average of one rank is its input
  }
  // Small chunks get small segments, so that even a chunk of a few hundred KiB pipelines. A
  // forwarding transport pipelines each message itself, piece by piece, but needs them short
  // enough to find room at the next rank while they arrive: it says how short (forward_bytes).
  if (t_.caps().forward) {
    seg_elems_ = std::clamp<size_t>(t_.caps().forward_bytes / esize_, 1, max_seg_elems_);
  } else {
    const size_t chunk_elems = (count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
    const size_t min_seg = std::clamp<size_t>(opts_.min_segment_bytes / esize_, 1, max_seg_elems_);
    seg_elems_ = std::clamp((chunk_elems + opts_.segments_per_chunk - 1) / opts_.segments_per_chunk,
                            min_seg, max_seg_elems_);
  }
  uint64_t tag = collective_tag(
      {count, uint64_t(dtype_), uint64_t(op_), uint64_t{seg_elems_ * esize_}, runs_++});
  run_collective(
      t_, [&] { t_.caps().forward ? run_forwarding(count, offset, tag) : run_ring(count, offset, tag); },
      [&] { return describe_allreduce("ring", count, dtype_, op_); });
}

void RingAllreduce::run_ring(size_t count, size_t offset, uint64_t tag) {
  const int n = t_.size(), r = t_.rank();
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  auto mod = [n](int v) { return ((v % n) + n) % n; };
  const size_t es = esize_, base = offset * es;  // base: byte offset of element 0 of this run
  const auto* in = static_cast<const char*>(in_) + base;
  auto* out = static_cast<char*>(out_) + base;
  Buffer& out_buf = out_buf_ ? *out_buf_ : *in_buf_;
  const size_t slot_bytes = slots_.size() / static_cast<size_t>(opts_.depth);
  std::vector<std::unique_ptr<Request>> sends;
  auto send = [&](const Buffer& b, Range seg) {
    sends.push_back(t_.isend(right, b, base + seg.begin * es, (seg.end - seg.begin) * es, tag));
  };

  // Reduce-scatter: at step s send chunk r-s, receive chunk r-s-1 and add it in. After n-1
  // steps this rank holds the full sum of chunk r+1.
  struct Item {
    int step;
    size_t seg;
  };
  std::vector<Item> items;
  for (int s = 0; s + 1 < n; ++s)
    for (size_t k = 0, m = segments(chunk(count, mod(r - s - 1))); k < m; ++k)
      items.push_back({s, k});
  std::vector<std::unique_ptr<Request>> recvs(items.size());
  // A segment received at the last step is the finished sum: with avg, divided there.
  auto divisor = [&](int s) { return s == n - 2 && op_ == ReduceOp::avg ? static_cast<float>(n) : 0.0f; };
  const bool in_transport = !slot_buf_;  // the transport reduces as the segment arrives
  auto post_recv = [&](size_t i) {
    Range seg = segment(chunk(count, mod(r - items[i].step - 1)), items[i].seg);
    const size_t off = seg.begin * es, len = (seg.end - seg.begin) * es;
    recvs[i] = in_transport
                   ? t_.irecv_sink(left, len, tag, StreamReducer(dtype_, out + off, in + off, divisor(items[i].step)))
                   : t_.irecv(left, *slot_buf_, (i % static_cast<size_t>(opts_.depth)) * slot_bytes, len, tag);
  };
  for (size_t i = 0; i < items.size() && i < static_cast<size_t>(opts_.depth); ++i) post_recv(i);
  {
    Range own = chunk(count, r);
    for (size_t k = 0, m = segments(own); k < m; ++k) send(*in_buf_, segment(own, k));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    recvs[i]->wait(opts_.timeout);
    recvs[i].reset();
    const int s = items[i].step;
    Range seg = segment(chunk(count, mod(r - s - 1)), items[i].seg);
    const size_t off = seg.begin * es, len = seg.end - seg.begin;
    if (!in_transport) {
      const char* slot = slots_.data() + (i % static_cast<size_t>(opts_.depth)) * slot_bytes;
      if (divisor(s) != 0)
        reduce_sum_div(dtype_, out + off, in + off, slot, len, divisor(s));
      else
        reduce_sum(dtype_, out + off, in + off, slot, len);
    }
    if (i + static_cast<size_t>(opts_.depth) < items.size())
      post_recv(i + static_cast<size_t>(opts_.depth));
    // Forward the partial sum as step s+1; a finished sum (the last step) goes out at once as
    // the allgather's first step, while it is still in cache, as NCCL's ring does.
    send(out_buf, seg);
  }
  // No wait for the sends before the allgather writes into the output in place: a region it
  // overwrites (chunk c, arriving from the left) comes only after the rank left of this one
  // finished chunk c's sum, further along the ring, which needed every byte this rank sent of
  // chunk c to have arrived.

  // Allgather: at step s send chunk r+1-s, receive chunk r-s straight into the output and
  // forward it at step s+1 (step 0, this rank's finished chunk r+1, went out above).
  items.clear();
  for (int s = 0; s + 1 < n; ++s)
    for (size_t k = 0, m = segments(chunk(count, mod(r - s))); k < m; ++k) items.push_back({s, k});
  recvs.clear();
  recvs.resize(items.size());
  const size_t window = 2 * static_cast<size_t>(opts_.depth);
  auto post_ag = [&](size_t i) {
    Range seg = segment(chunk(count, mod(r - items[i].step)), items[i].seg);
    recvs[i] = t_.irecv(left, out_buf, base + seg.begin * es, (seg.end - seg.begin) * es, tag);
  };
  for (size_t i = 0; i < items.size() && i < window; ++i) post_ag(i);
  for (size_t i = 0; i < items.size(); ++i) {
    recvs[i]->wait(opts_.timeout);
    recvs[i].reset();
    if (i + window < items.size()) post_ag(i + window);
    const int s = items[i].step;
    if (s + 2 < n) send(out_buf, segment(chunk(count, mod(r - s)), items[i].seg));
  }
  for (auto& q : sends) q->wait(opts_.timeout);
}

// The same ring where the transport forwards (caps().forward): each received segment goes on to
// the right as it arrives, not through the output first. Reduce-scatter steps reduce it straight
// into the right rank's memory (the last one into the output as well, which starts the
// allgather) and allgather steps copy it into the output and on, as NCCL's recvReduceSend,
// recvReduceCopySend and recvCopySend do; only the last allgather step just receives.
// As in NCCL, the buffer goes round in rounds of one segment per chunk, every round a whole
// reduce-scatter and allgather: a forward reaches the head of the queue to the right while its
// data arrives, instead of behind a whole chunk of this rank's own, so it can go straight in.
void RingAllreduce::run_forwarding(size_t count, size_t offset, uint64_t tag) {
  const int n = t_.size(), r = t_.rank();
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  auto mod = [n](int v) { return ((v % n) + n) % n; };
  const size_t es = esize_, base = offset * es;
  const auto* in = static_cast<const char*>(in_) + base;
  auto* out = static_cast<char*>(out_) + base;
  Buffer& out_buf = out_buf_ ? *out_buf_ : *in_buf_;
  const size_t round = static_cast<size_t>(n) * seg_elems_;
  const size_t rounds = std::max<size_t>(1, (count + round - 1) / round);
  const int last_rs = n - 2, last = 2 * n - 3;
  // The elements of step s of round k: this rank's own chunk at step -1 (a send), then the
  // chunks it receives from the left, in the order the left sends them.
  auto range = [&](size_t k, int s) {
    const size_t b = k * round, e = std::min(count, b + round);
    const int c = s < 0 ? r : s <= last_rs ? mod(r - s - 1) : mod(r - (s - n + 1));
    Range x = chunk(e - b, c);
    return Range{b + x.begin, b + x.end};
  };
  std::vector<std::unique_ptr<Request>> sends;
  std::deque<std::unique_ptr<Request>> recvs;  // posted, in order
  auto post = [&](size_t k, int s) {
    const Range seg = range(k, s);
    const size_t off = seg.begin * es, len = (seg.end - seg.begin) * es;
    if (s < 0) {
      sends.push_back(t_.isend(right, *in_buf_, base + off, len, tag));
    } else if (s == last) {
      recvs.push_back(t_.irecv(left, out_buf, base + off, len, tag));
    } else {
      const float div = s == last_rs && op_ == ReduceOp::avg ? static_cast<float>(n) : 0.0f;
      ForwardStep step{dtype_, out + off, s <= last_rs ? in + off : nullptr, div, s >= last_rs};
      Forward f = t_.irecv_forward(left, right, len, tag, out_buf, base + off, step);
      recvs.push_back(std::move(f.recv));
      sends.push_back(std::move(f.send));
    }
  };
  const size_t window = 2 * static_cast<size_t>(opts_.depth);
  size_t k = 0;
  int s = -1;  // the next (round, step) to post
  auto fill = [&] {
    for (; k < rounds && recvs.size() < window; s = s == last ? -1 : s + 1, k += s == -1) post(k, s);
  };
  fill();
  while (!recvs.empty()) {
    recvs.front()->wait(opts_.timeout);
    recvs.pop_front();
    fill();
  }
  for (auto& q : sends) q->wait(opts_.timeout);
}

}  // namespace ringbench
