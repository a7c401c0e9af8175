#include "collectives/allreduce.h"

#include <algorithm>

#include "base/errors.h"

namespace ringbench {

AllreduceAlgo parse_algo(const std::string& s) {
  if (s == "auto") return AllreduceAlgo::automatic;
  if (s == "ring") return AllreduceAlgo::ring;
  if (s == "direct") return AllreduceAlgo::direct;
  if (s == "rd") return AllreduceAlgo::rd;
  if (s == "hd") return AllreduceAlgo::hd;
  throw Error("unknown allreduce algorithm '" + s + "': use auto, ring, direct, rd or hd");
}

const char* algo_name(AllreduceAlgo a) {
  switch (a) {
    case AllreduceAlgo::automatic: return "auto";
    case AllreduceAlgo::ring: return "ring";
    case AllreduceAlgo::direct: return "direct";
    case AllreduceAlgo::rd: return "rd";
    case AllreduceAlgo::hd: return "hd";
  }
  return "?";
}

namespace {

bool power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

void check_table(const std::vector<AlgoRange>& table, int n) {
  for (size_t i = 0; i < table.size(); ++i) {
    const std::string where = "allreduce cost table range " + std::to_string(i) + ": ";
    if (table[i].algo == AllreduceAlgo::automatic) throw Error(where + "names auto, not an algorithm");
    if (i && table[i].max_bytes <= table[i - 1].max_bytes) throw Error(where + "sizes are not ascending");
    if (table[i].algo == AllreduceAlgo::rd && !power_of_two(n))
      throw Error(where + "rd needs a power-of-two number of ranks, not " + std::to_string(n));
  }
  if (!table.empty() && table.back().max_bytes != SIZE_MAX) throw Error("allreduce cost table: the last range must be open-ended");
}

// automatic's choice by size over n ranks: the cost table, or the built-in rule as one (rd on
// a power of two above 2 ranks, else direct, up to direct_max_bytes; the ring above).
std::vector<AlgoRange> size_ranges(const AllreduceOptions& o, int n) {
  if (!o.table.empty()) return o.table;
  const AllreduceAlgo small = n > 2 && power_of_two(n) ? AllreduceAlgo::rd : AllreduceAlgo::direct;
  return {{o.direct_max_bytes, small}, {SIZE_MAX, AllreduceAlgo::ring}};
}

// The largest message (up to the buffer's) that run() gives `a`; none when it never runs `a`.
std::optional<size_t> largest_bytes(const AllreduceOptions& o, const std::vector<AlgoRange>& ranges, AllreduceAlgo a,
                                    size_t max_bytes) {
  if (o.algo != AllreduceAlgo::automatic) return o.algo == a ? std::optional(max_bytes) : std::nullopt;
  std::optional<size_t> largest;
  size_t from = 0;
  for (const auto& r : ranges) {
    if (r.algo == a && from <= max_bytes) largest = std::min(r.max_bytes, max_bytes);
    if (r.max_bytes == SIZE_MAX) break;
    from = r.max_bytes + 1;
  }
  return largest;
}

}  // namespace

size_t Allreduce::scratch_bytes(size_t max_count, size_t esize, int ranks, const AllreduceOptions& opts) {
  if (ranks < 2) return 0;
  const size_t max_bytes = max_count * esize;
  const std::vector<AlgoRange> ranges = size_ranges(opts, ranks);
  size_t bytes = 0;
  if (ringbench::largest_bytes(opts, ranges, AllreduceAlgo::hd, max_bytes))
    bytes += HdAllreduce::scratch_bytes(max_count, esize, ranks);
  if (ringbench::largest_bytes(opts, ranges, AllreduceAlgo::ring, max_bytes))
    bytes += RingAllreduce::scratch_bytes(max_count, esize, ranks, opts.ring);
  for (AllreduceAlgo a : {AllreduceAlgo::direct, AllreduceAlgo::rd})  // the copies of peers' inputs
    if (const auto b = ringbench::largest_bytes(opts, ranges, a, max_bytes))
      bytes += (a == AllreduceAlgo::rd ? 1 : size_t(ranks)) * std::min(max_count, *b / esize) * esize;
  return bytes;
}

Allreduce::Allreduce(Transport& t, const void* in, void* out, size_t max_count, DType dtype,
                     ReduceOp op, const AllreduceOptions& opts)
    : opts_(opts), esize_(dtype_size(dtype)), n_(t.size()) {
  if (opts.algo == AllreduceAlgo::automatic) check_table(opts.table, n_);
  ranges_ = size_ranges(opts, n_);
  const size_t max_bytes = max_count * esize_;
  if (largest_bytes(AllreduceAlgo::hd, max_bytes))
    hd_ = std::make_unique<HdAllreduce>(t, in, out, max_count, dtype, op, opts.ring.timeout);
  if (largest_bytes(AllreduceAlgo::ring, max_bytes))
    ring_ = std::make_unique<RingAllreduce>(t, in, out, max_count, dtype, op, opts.ring);
  for (AllreduceAlgo a : {AllreduceAlgo::direct, AllreduceAlgo::rd})
    if (const auto b = largest_bytes(a, max_bytes))  // only the copies it needs
      (a == AllreduceAlgo::rd ? rd_ : direct_) = std::make_unique<DirectAllreduce>(
          t, in, out, std::min(max_count, *b / esize_), dtype, op, opts.ring.timeout, a == AllreduceAlgo::rd, max_count);
}

// The largest message (up to the buffer's) that run() gives `a`; none when it never runs `a`.
std::optional<size_t> Allreduce::largest_bytes(AllreduceAlgo a, size_t max_bytes) const {
  return ringbench::largest_bytes(opts_, ranges_, a, max_bytes);
}

AllreduceAlgo Allreduce::chosen(size_t count) const {
  if (opts_.algo != AllreduceAlgo::automatic) return opts_.algo;
  const size_t bytes = count * esize_;
  for (const auto& r : ranges_)
    if (bytes <= r.max_bytes) return r.algo;
  return ranges_.back().algo;  // unreachable: the last range is open-ended
}

const char* Allreduce::run(size_t count, size_t offset) {
  const AllreduceAlgo a = chosen(count);
  switch (a) {
    case AllreduceAlgo::hd: hd_->run(count, offset); break;
    case AllreduceAlgo::direct: direct_->run(count, offset); break;
    case AllreduceAlgo::rd: rd_->run(count, offset); break;
    default: ring_->run(count, offset); break;
  }
  return algo_name(a);
}

}  // namespace ringbench
