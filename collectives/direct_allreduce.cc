#include "collectives/direct_allreduce.h"

#include <cstring>
#include <string>

#include "collectives/errors.h"
#include "collectives/reduce.h"
#include "collectives/tag.h"

namespace ringbench {

DirectAllreduce::DirectAllreduce(Transport& t, const void* in, void* out, size_t max_count,
                                 DType dtype, ReduceOp op, std::chrono::milliseconds timeout)
    : t_(t), in_(in), out_(out), max_count_(max_count), dtype_(dtype), op_(op), timeout_(timeout),
      esize_(dtype_size(dtype)) {
  if (t.size() > 1) {
    scratch_.resize(static_cast<size_t>(t.size()) * max_count * esize_);
    in_buf_ = t.register_buffer(const_cast<void*>(in), max_count * esize_);
    scratch_buf_ = t.register_buffer(scratch_.data(), scratch_.size());
  }
}

void DirectAllreduce::run(size_t count) {
  if (count > max_count_)
    throw Error("allreduce of " + std::to_string(count) + " elements exceeds the " +
                std::to_string(max_count_) + " this allreduce was set up for");
  if (t_.size() == 1) {
    if (in_ != out_ && count) std::memmove(out_, in_, count * esize_);
    return;
  }
  uint64_t tag = collective_tag({0xd1ec7, count, uint64_t(dtype_), uint64_t(op_), runs_++});
  run_collective(
      t_, [&] { run_direct(count, tag); },
      [&] { return describe_allreduce("direct", count, dtype_, op_); });
}

void DirectAllreduce::run_direct(size_t count, uint64_t tag) {
  const int n = t_.size(), me = t_.rank();
  const size_t bytes = count * esize_, slot = max_count_ * esize_;
  std::vector<std::unique_ptr<Request>> reqs;
  for (int p = 0; p < n; ++p)
    if (p != me) reqs.push_back(t_.irecv(p, *scratch_buf_, static_cast<size_t>(p) * slot, bytes, tag));
  // Send to the ranks after us first, so that no two ranks start on the same peer.
  for (int i = 1; i < n; ++i) reqs.push_back(t_.isend((me + i) % n, *in_buf_, 0, bytes, tag));
  for (auto& r : reqs) r->wait(timeout_);
  const bool inplace = in_ == out_;
  // In-place, the output overwrites our input while it is still to be added: keep a copy.
  if (inplace && bytes) std::memcpy(scratch_.data() + static_cast<size_t>(me) * slot, in_, bytes);
  auto input = [&](int r) -> const void* {
    if (r == me && !inplace) return in_;
    return scratch_.data() + static_cast<size_t>(r) * slot;
  };
  const float divisor = static_cast<float>(n);
  for (int r = 1; r < n; ++r) {
    const void* acc = r == 1 ? input(0) : out_;
    if (r == n - 1 && op_ == ReduceOp::avg)
      reduce_sum_div(dtype_, out_, acc, input(r), count, divisor);
    else
      reduce_sum(dtype_, out_, acc, input(r), count);
  }
}

}  // namespace ringbench
