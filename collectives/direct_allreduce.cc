#include "collectives/direct_allreduce.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/errors.h"
#include "collectives/reduce.h"
#include "collectives/tag.h"

namespace ringbench {

DirectAllreduce::DirectAllreduce(Transport& t, const void* in, void* out, size_t max_count,
                                 DType dtype, ReduceOp op, std::chrono::milliseconds timeout,
                                 bool recursive_doubling, size_t extent)
    : t_(t), in_(in), out_(out), max_count_(max_count), extent_(std::max(extent, max_count)),
      dtype_(dtype), op_(op), timeout_(timeout), esize_(dtype_size(dtype)),
      rd_(recursive_doubling) {
  const int n = t.size();
  if (rd_ && (n & (n - 1)) != 0)
    throw Error("recursive doubling needs a power-of-two number of ranks, not " +
                std::to_string(n) + ": use the direct or ring algorithm");
  if (n > 1) {
    // One-shot keeps every rank's input; recursive doubling one partner's at a time.
    scratch_.resize(static_cast<size_t>(rd_ ? 1 : n) * max_count * esize_);
    in_buf_ = t.register_buffer(const_cast<void*>(in), extent_ * esize_);
    if (rd_ && in != out) out_buf_ = t.register_buffer(out, extent_ * esize_);
    scratch_buf_ = t.register_buffer(scratch_.data(), scratch_.size());
  }
}

void DirectAllreduce::run(size_t count, size_t offset) {
  if (count > max_count_ || offset > extent_ - count)
    throw Error("allreduce of elements [" + std::to_string(offset) + ", " +
                std::to_string(offset + count) + ") exceeds the " + std::to_string(max_count_) +
                " elements (within " + std::to_string(extent_) +
                ") this allreduce was set up for");
  if (t_.size() == 1) {
    if (in_ != out_ && count)
      std::memmove(static_cast<char*>(out_) + offset * esize_,
                   static_cast<const char*>(in_) + offset * esize_, count * esize_);
    return;
  }
  uint64_t tag =
      collective_tag({rd_ ? 0x4dU : 0xd1ec7U, count, uint64_t(dtype_), uint64_t(op_), runs_++});
  run_collective(
      t_, [&] { rd_ ? run_rd(count, offset, tag) : run_direct(count, offset, tag); },
      [&] { return describe_allreduce(name(), count, dtype_, op_); });
}

// Round k exchanges the partial sum with rank me ^ 2^k and adds it in; after log2(n) rounds
// every rank holds the total. The first round reads the input, later ones the output.
void DirectAllreduce::run_rd(size_t count, size_t offset, uint64_t tag) {
  const int n = t_.size(), me = t_.rank();
  const size_t bytes = count * esize_, base = offset * esize_;
  const void* in = static_cast<const char*>(in_) + base;
  void* out = static_cast<char*>(out_) + base;
  Buffer& out_buf = out_buf_ ? *out_buf_ : *in_buf_;
  for (int bit = 1; bit < n; bit <<= 1) {
    const int partner = me ^ bit;
    auto recv = t_.irecv(partner, *scratch_buf_, 0, bytes, tag);
    auto send = t_.isend(partner, bit == 1 ? *in_buf_ : out_buf, base, bytes, tag);
    recv->wait(timeout_);
    send->wait(timeout_);  // the add below overwrites what was sent
    const void* acc = bit == 1 ? in : out;
    if (bit << 1 == n && op_ == ReduceOp::avg)
      reduce_sum_div(dtype_, out, acc, scratch_.data(), count, static_cast<float>(n));
    else
      reduce_sum(dtype_, out, acc, scratch_.data(), count);
  }
}

void DirectAllreduce::run_direct(size_t count, size_t offset, uint64_t tag) {
  const int n = t_.size(), me = t_.rank();
  const size_t bytes = count * esize_, slot = max_count_ * esize_, base = offset * esize_;
  const void* in = static_cast<const char*>(in_) + base;
  void* out = static_cast<char*>(out_) + base;
  std::vector<std::unique_ptr<Request>> reqs;
  for (int p = 0; p < n; ++p)
    if (p != me) reqs.push_back(t_.irecv(p, *scratch_buf_, static_cast<size_t>(p) * slot, bytes, tag));
  // Send to the ranks after us first, so that no two ranks start on the same peer.
  for (int i = 1; i < n; ++i) reqs.push_back(t_.isend((me + i) % n, *in_buf_, base, bytes, tag));
  for (auto& r : reqs) r->wait(timeout_);
  const bool inplace = in == out;
  // In-place, the output overwrites our input while it is still to be added: keep a copy.
  if (inplace && bytes) std::memcpy(scratch_.data() + static_cast<size_t>(me) * slot, in, bytes);
  auto input = [&](int r) -> const void* {
    if (r == me && !inplace) return in;
    return scratch_.data() + static_cast<size_t>(r) * slot;
  };
  const float divisor = static_cast<float>(n);
  for (int r = 1; r < n; ++r) {
    const void* acc = r == 1 ? input(0) : out;
    if (r == n - 1 && op_ == ReduceOp::avg)
      reduce_sum_div(dtype_, out, acc, input(r), count, divisor);
    else
      reduce_sum(dtype_, out, acc, input(r), count);
  }
}

}  // namespace ringbench
