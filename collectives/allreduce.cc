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

Allreduce::Allreduce(Transport& t, const void* in, void* out, size_t max_count, DType dtype,
                     ReduceOp op, const AllreduceOptions& opts)
    : opts_(opts), esize_(dtype_size(dtype)) {
  if (opts.algo == AllreduceAlgo::hd) {
    hd_ = std::make_unique<HdAllreduce>(t, in, out, max_count, dtype, op, opts.ring.timeout);
    return;
  }
  const bool forced_small = opts.algo == AllreduceAlgo::direct || opts.algo == AllreduceAlgo::rd;
  if (!forced_small)
    ring_ = std::make_unique<RingAllreduce>(t, in, out, max_count, dtype, op, opts.ring);
  if (opts.algo != AllreduceAlgo::ring) {
    const int n = t.size();
    const bool rd = opts.algo == AllreduceAlgo::rd ||
                    (opts.algo == AllreduceAlgo::automatic && n > 2 && (n & (n - 1)) == 0);
    // The small-message algorithms keep copies of peers' inputs: set up only what they run.
    size_t small_count = forced_small ? max_count : std::min(max_count, opts.direct_max_bytes / esize_);
    small_ = std::make_unique<DirectAllreduce>(t, in, out, small_count, dtype, op,
                                               opts.ring.timeout, rd, max_count);
  }
}

bool Allreduce::small(size_t count) const {
  if (opts_.algo == AllreduceAlgo::automatic) return count * esize_ <= opts_.direct_max_bytes;
  return opts_.algo != AllreduceAlgo::ring;
}

const char* Allreduce::run(size_t count, size_t offset) {
  if (hd_) {
    hd_->run(count, offset);
    return "hd";
  }
  if (small(count)) {
    small_->run(count, offset);
    return small_->name();
  }
  ring_->run(count, offset);
  return "ring";
}

}  // namespace ringbench
