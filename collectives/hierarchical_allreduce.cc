#include "collectives/hierarchical_allreduce.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/errors.h"
#include "collectives/level_handoff.h"
#include "collectives/reduce.h"
#include "collectives/ring_allgather.h"
#include "collectives/tag.h"

namespace ringbench {
namespace {

size_t slot_elems_for(size_t max_count, size_t esize, const RingOptions& o, int local_ranks) {
  const size_t share = (max_count + size_t(local_ranks) - 1) / size_t(local_ranks);
  return std::max<size_t>(1, std::min(std::max<size_t>(1, o.segment_bytes / esize), share));
}

// Which level failed, for the error: the node's ranks or the ring across the nodes. The levels
// number their peers by local rank and by node; `job_rank` turns that into the job's rank, which
// the error names, as do the aborts that stop every peer of both levels.
template <class JobRank>
[[noreturn]] void rethrow_level(Transport& failed, Transport& other, const Error& e, const std::string& level,
                                JobRank job_rank) {
  const auto* io = dynamic_cast<const IoError*>(&e);
  const int peer = io && io->peer() >= 0 ? job_rank(io->peer()) : -1;
  std::string what = level + " failed: " + e.what();
  if (peer >= 0) what += " [that peer is rank " + std::to_string(peer) + " of the job]";
  failed.abort(what);
  other.abort(what);
  if (dynamic_cast<const TimeoutError*>(&e)) throw TimeoutError(peer, what);
  if (io) throw IoError(peer, what);
  throw Error(what);
}

}  // namespace

HierarchicalAllreduce::HierarchicalAllreduce(Transport& intra, Transport& inter, const void* in, void* out,
                                             size_t max_count, DType dtype, ReduceOp op, const AllreduceOptions& opts,
                                             size_t chunk_bytes)
    : intra_(intra), inter_(inter), dtype_(dtype), op_(op), opts_(opts.ring), max_count_(max_count),
      slot_elems_(slot_elems_for(max_count, dtype_size(dtype), opts.ring, intra.size())),
      chunk_elems_(chunk_bytes ? std::max<size_t>(1, chunk_bytes / dtype_size(dtype)) : 0),
      bufs_(intra, in, max_count, out, max_count, intra.size() > 1 ? size_t(opts.ring.depth) * slot_elems_ : 0,
            dtype_size(dtype)),
      across_(inter, out, out, max_count, dtype, ReduceOp::sum, opts) {
  if (opts_.depth < 1) throw Error("pipeline depth must be >= 1");
  if (opts_.segment_bytes < dtype_size(dtype)) throw Error("segment size must be at least one element");
}

Span HierarchicalAllreduce::share(size_t count, int c) const {
  const size_t n = size_t(intra_.size()), i = size_t(((c % intra_.size()) + intra_.size()) % intra_.size());
  const size_t base = count / n, extra = count % n;
  const size_t begin = i * base + std::min(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

const char* HierarchicalAllreduce::run(size_t count, size_t offset) {
  if (count > max_count_ || offset > max_count_ - count)
    throw Error("allreduce of elements [" + std::to_string(offset) + ", " + std::to_string(offset + count) +
                ") exceeds the " + std::to_string(max_count_) + " this hierarchical allreduce was set up for");
  run_levels(count, offset);
  return "hier";
}

void HierarchicalAllreduce::run_levels(size_t count, size_t offset) {
  const uint64_t run = runs_++;
  const uint64_t tag = collective_tag({0x41e7U, count, uint64_t(dtype_), uint64_t(op_), slot_elems_, run});
  const std::string what = describe_allreduce("hier", count, dtype_, op_);
  if (chunk_elems_ && count > chunk_elems_) return run_pipelined(count, offset, tag, what);
  scatter_level(count, offset, tag, what);
  cross_level(count, offset, what);
  gather_level(count, offset, tag, what);
}

// Chunk k's tag is the run's with k mixed in. The level within the node runs on this thread:
// reduce-scatter chunk k, then allgather chunk k-1 once it has crossed; the level across runs on
// its own thread, each chunk once it is reduce-scattered. Both levels keep their message order,
// the same on every rank, so each level's messages still match in order.
void HierarchicalAllreduce::run_pipelined(size_t count, size_t offset, uint64_t tag, const std::string& what) {
  const size_t chunks = (count + chunk_elems_ - 1) / chunk_elems_;
  auto begin = [&](size_t k) { return offset + k * chunk_elems_; };
  auto size = [&](size_t k) { return std::min(chunk_elems_, count - k * chunk_elems_); };
  auto chunk_tag = [&](size_t k) { return collective_tag({tag, k}); };
  // A bound on one chunk's wait for the other level: each of its steps within its own limit.
  const int64_t steps = 2 * (intra_.size() + inter_.size());
  LevelHandoff handoff(steps * transfer_timeout(opts_.timeout, chunk_elems_ * bufs_.esize()),
                       [&](const std::string& why) {
                         intra_.abort(what + ": " + why);
                         inter_.abort(what + ": " + why);
                       });
  std::thread across([&] {
    handoff.run_guarded([&] {
      for (size_t k = 0; k < chunks; ++k) {
        handoff.wait_for(LevelHandoff::scattered, k + 1, what + ", chunk " + std::to_string(k) + " within the node");
        cross_level(size(k), begin(k), what);
        handoff.advance(LevelHandoff::crossed);
      }
    });
  });
  handoff.run_guarded([&] {
    auto gather = [&](size_t k) {
      handoff.wait_for(LevelHandoff::crossed, k + 1, what + ", chunk " + std::to_string(k) + " across the nodes");
      gather_level(size(k), begin(k), chunk_tag(k), what);
    };
    for (size_t k = 0; k < chunks; ++k) {
      scatter_level(size(k), begin(k), chunk_tag(k), what);
      handoff.advance(LevelHandoff::scattered);
      if (k > 0) gather(k - 1);
    }
    gather(chunks - 1);
  });
  across.join();
  handoff.rethrow_first();
}

// A failure within the node, its peer named by job rank (rank = node x L + local rank).
void HierarchicalAllreduce::rethrow_within_node(const Error& e, const std::string& what) {
  auto node_peer = [&](int local) { return inter_.rank() * intra_.size() + local; };
  rethrow_level(intra_, inter_, e, what + ", within the node (" + intra_.caps().name + ")", node_peer);
}

void HierarchicalAllreduce::scatter_level(size_t count, size_t offset, uint64_t tag, const std::string& what) {
  const size_t es = bufs_.esize();
  try {
    if (intra_.size() > 1) {
      reduce_scatter(count, offset, tag);
    } else if (bufs_.in() != bufs_.out() && count) {
      std::memcpy(bufs_.out() + offset * es, bufs_.in() + offset * es, count * es);
    }
  } catch (const Error& e) {
    rethrow_within_node(e, what);
  }
}

// Allreduces this rank's share of elements [offset, offset + count) across the nodes.
void HierarchicalAllreduce::cross_level(size_t count, size_t offset, const std::string& what) {
  const size_t es = bufs_.esize();
  // The job's ranks lie node by node: rank = node x L + local rank.
  auto cross_peer = [&](int node) { return node * intra_.size() + intra_.rank(); };
  const Span mine = share(count, intra_.rank() + 1);
  try {
    across_.run(mine.size(), offset + mine.begin);
  } catch (const Error& e) {
    rethrow_level(inter_, intra_, e, what + ", across the nodes (" + inter_.caps().name + ")", cross_peer);
  }
  if (op_ == ReduceOp::avg) {
    char* p = bufs_.out() + (offset + mine.begin) * es;
    divide(dtype_, p, p, mine.size(), float(intra_.size() * inter_.size()));
  }
}

void HierarchicalAllreduce::gather_level(size_t count, size_t offset, uint64_t tag, const std::string& what) {
  try {
    if (intra_.size() > 1) allgather(count, offset, tag);
  } catch (const Error& e) {
    rethrow_within_node(e, what);
  }
}

// At step s this rank sends share l-s (its own input at step 0, a partial sum after) and
// receives share l-s-1 from the left, adding its own input; after L-1 steps it holds the node's
// sum of share l+1.
void HierarchicalAllreduce::reduce_scatter(size_t count, size_t offset, uint64_t tag) {
  const int n = intra_.size(), l = intra_.rank(), right = (l + 1) % n, left = (l + n - 1) % n;
  const size_t es = bufs_.esize(), base = offset * es, depth = size_t(opts_.depth);
  const size_t seg = std::min(ring_segment_elems((count + size_t(n) - 1) / size_t(n), es, opts_), slot_elems_);
  struct Item {
    int step;
    Span seg;
  };
  std::vector<Item> items;
  for (int s = 0; s + 1 < n; ++s)
    for (size_t k = 0, m = segment_count(share(count, l - s - 1), seg); k < m; ++k)
      items.push_back({s, segment_of(share(count, l - s - 1), seg, k)});
  std::vector<std::unique_ptr<Request>> sends, recvs(items.size());
  auto post = [&](size_t i) {
    recvs[i] = intra_.irecv(left, bufs_.scratch_buf(), (i % depth) * seg * es, items[i].seg.size() * es, tag);
  };
  for (size_t i = 0; i < items.size() && i < depth; ++i) post(i);
  const Span own = share(count, l);
  for (size_t k = 0, m = segment_count(own, seg); k < m; ++k) {
    const Span s = segment_of(own, seg, k);
    sends.push_back(intra_.isend(right, bufs_.in_buf(), base + s.begin * es, s.size() * es, tag));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    recvs[i]->wait(transfer_timeout(opts_.timeout, items[i].seg.size() * es));
    recvs[i].reset();
    const Span s = items[i].seg;
    const size_t at = base + s.begin * es;
    reduce_sum(dtype_, bufs_.out() + at, bufs_.in() + at, bufs_.scratch() + (i % depth) * seg * es, s.size());
    if (i + depth < items.size()) post(i + depth);
    if (items[i].step + 2 < n) sends.push_back(intra_.isend(right, bufs_.out_buf(), at, s.size() * es, tag));
  }
  for (auto& q : sends) q->wait(transfer_timeout(opts_.timeout, seg * es));
}

// At step s this rank receives share l-s from the left, straight into its place, and passes it
// on at step s+1; at step 0 it sends its own finished share l+1.
void HierarchicalAllreduce::allgather(size_t count, size_t offset, uint64_t tag) {
  const int n = intra_.size(), l = intra_.rank(), right = (l + 1) % n, left = (l + n - 1) % n;
  const size_t es = bufs_.esize(), base = offset * es, window = 2 * size_t(opts_.depth);
  const size_t seg = ring_segment_elems((count + size_t(n) - 1) / size_t(n), es, opts_);
  Buffer& out = bufs_.out_buf();
  struct Item {
    int step;
    Span seg;
  };
  std::vector<Item> items;
  for (int s = 0; s + 1 < n; ++s)
    for (size_t k = 0, m = segment_count(share(count, l - s), seg); k < m; ++k)
      items.push_back({s, segment_of(share(count, l - s), seg, k)});
  std::vector<std::unique_ptr<Request>> sends, recvs(items.size());
  auto send = [&](Span s) { sends.push_back(intra_.isend(right, out, base + s.begin * es, s.size() * es, tag)); };
  auto post = [&](size_t i) {
    recvs[i] = intra_.irecv(left, out, base + items[i].seg.begin * es, items[i].seg.size() * es, tag);
  };
  for (size_t i = 0; i < items.size() && i < window; ++i) post(i);
  const Span finished = share(count, l + 1);
  for (size_t k = 0, m = segment_count(finished, seg); k < m; ++k) send(segment_of(finished, seg, k));
  for (size_t i = 0; i < items.size(); ++i) {
    recvs[i]->wait(transfer_timeout(opts_.timeout, items[i].seg.size() * es));
    recvs[i].reset();
    if (i + window < items.size()) post(i + window);
    if (items[i].step + 2 < n) send(items[i].seg);
  }
  for (auto& q : sends) q->wait(transfer_timeout(opts_.timeout, seg * es));
}

}  // namespace ringbench
