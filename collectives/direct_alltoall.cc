#include "collectives/direct_alltoall.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/errors.h"
#include "collectives/tag.h"

namespace ringbench {

DirectAlltoall::DirectAlltoall(Transport& t, const void* in, void* out, size_t max_block, DType dtype,
                               RingOptions opts)
    : t_(t), max_block_(max_block), dtype_(dtype), opts_(opts),
      bufs_(t, in, max_block * static_cast<size_t>(t.size()), out, max_block * static_cast<size_t>(t.size()),
            scratch_bytes(max_block, dtype_size(dtype), t.size(), in == out) / dtype_size(dtype), dtype_size(dtype)) {}

void DirectAlltoall::run(size_t block) {
  if (block > max_block_)
    throw Error("alltoall of " + std::to_string(block) + " elements per peer exceeds the " +
                std::to_string(max_block_) + " it was set up for");
  const size_t es = bufs_.esize();
  if (t_.size() == 1) {
    if (bufs_.in() != bufs_.out() && block) std::memcpy(bufs_.out(), bufs_.in(), block * es);
    return;
  }
  const uint64_t tag = collective_tag({0xa2aU, block, uint64_t(dtype_), runs_++});
  run_collective(t_, [&] { exchange(block, tag); }, [&] {
    return "alltoall (direct) of " + std::to_string(block) + " x " + dtype_name(dtype_) + " per peer";
  });
}

void DirectAlltoall::exchange(size_t block, uint64_t tag) {
  const int n = t_.size(), r = t_.rank();
  const size_t es = bufs_.esize(), bytes = block * es;
  const bool inplace = bufs_.in() == bufs_.out();
  auto at = [&](int p) { return static_cast<size_t>(p) * bytes; };
  // The block for the i-th peer after this rank: in place, the scratch's block i-1.
  auto from_at = [&](int i) { return inplace ? static_cast<size_t>(i - 1) * bytes : at((r + i) % n); };
  if (inplace && bytes)
    for (int i = 1; i < n; ++i) std::memcpy(bufs_.scratch() + from_at(i), bufs_.out() + at((r + i) % n), bytes);
  Buffer& from = inplace ? bufs_.scratch_buf() : bufs_.in_buf();
  std::vector<std::unique_ptr<Request>> reqs;
  for (int i = 1; i < n; ++i) {
    const int p = (r + n - i) % n;  // the rank whose send to us comes i-th in its order
    reqs.push_back(t_.irecv(p, bufs_.out_buf(), at(p), bytes, tag));
  }
  for (int i = 1; i < n; ++i) reqs.push_back(t_.isend((r + i) % n, from, from_at(i), bytes, tag));
  if (bytes && !inplace) std::memcpy(bufs_.out() + at(r), bufs_.in() + at(r), bytes);  // in place it is there
  // All of them at once: the last can complete only after every other one has moved.
  const auto wait = transfer_timeout(opts_.timeout, reqs.size() * bytes);
  for (auto& q : reqs) q->wait(wait);
}

}  // namespace ringbench
