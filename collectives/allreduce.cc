#include "collectives/allreduce.h"

#include <algorithm>

#include "collectives/errors.h"

namespace ringbench {

AllreduceAlgo parse_algo(const std::string& s) {
  if (s == "auto") return AllreduceAlgo::automatic;
  if (s == "ring") return AllreduceAlgo::ring;
  if (s == "direct") return AllreduceAlgo::direct;
  throw Error("unknown allreduce algorithm '" + s + "': use auto, ring or direct");
}

const char* algo_name(AllreduceAlgo a) {
  switch (a) {
    case AllreduceAlgo::automatic: return "auto";
    case AllreduceAlgo::ring: return "ring";
    case AllreduceAlgo::direct: return "direct";
  }
  return "?";
}

Allreduce::Allreduce(Transport& t, const void* in, void* out, size_t max_count, DType dtype,
                     ReduceOp op, const AllreduceOptions& opts)
    : opts_(opts), esize_(dtype_size(dtype)) {
  if (opts.algo != AllreduceAlgo::direct)
    ring_ = std::make_unique<RingAllreduce>(t, in, out, max_count, dtype, op, opts.ring);
  if (opts.algo != AllreduceAlgo::ring) {
    // The direct algorithm keeps a copy of every rank's input: only set it up for what it runs.
    size_t direct_count = opts.algo == AllreduceAlgo::direct
                              ? max_count
                              : std::min(max_count, opts.direct_max_bytes / esize_);
    direct_ = std::make_unique<DirectAllreduce>(t, in, out, direct_count, dtype, op,
                                                opts.ring.timeout);
  }
}

AllreduceAlgo Allreduce::choose(size_t count) const {
  if (opts_.algo != AllreduceAlgo::automatic) return opts_.algo;
  return count * esize_ <= opts_.direct_max_bytes ? AllreduceAlgo::direct : AllreduceAlgo::ring;
}

AllreduceAlgo Allreduce::run(size_t count) {
  AllreduceAlgo a = choose(count);
  if (a == AllreduceAlgo::direct) direct_->run(count);
  else ring_->run(count);
  return a;
}

}  // namespace ringbench
