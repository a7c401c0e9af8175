#include "collectives/hd_allreduce.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "base/errors.h"
#include "collectives/reduce.h"
#include "collectives/tag.h"

namespace ringbench {

HdAllreduce::HdAllreduce(Transport& t, const void* in, void* out, size_t max_count, DType dtype, ReduceOp op,
                         std::chrono::milliseconds timeout)
    : t_(t), max_count_(max_count), dtype_(dtype), op_(op), timeout_(timeout),
      bufs_(t, in, max_count, out, max_count, scratch_bytes(max_count, dtype_size(dtype), t.size()) / dtype_size(dtype),
            dtype_size(dtype)) {}

void HdAllreduce::run(size_t count, size_t offset) {
  if (count > max_count_ || offset > max_count_ - count)
    throw Error("allreduce of elements [" + std::to_string(offset) + ", " + std::to_string(offset + count) +
                ") exceeds the " + std::to_string(max_count_) + " this allreduce was set up for");
  const size_t es = bufs_.esize();
  if (t_.size() == 1) {
    if (bufs_.in() != bufs_.out() && count) std::memmove(bufs_.out() + offset * es, bufs_.in() + offset * es, count * es);
    return;
  }
  const uint64_t tag = collective_tag({0x4a1fU, count, offset, uint64_t(dtype_), uint64_t(op_), runs_++});
  run_collective(t_, [&] { run_hd(count, offset, tag); },
                 [&] { return describe_allreduce("hd", count, dtype_, op_); });
}

// One pass of the algorithm: the p active ranks' view of the buffer, cut into p blocks.
struct HdAllreduce::Pass {
  HdAllreduce& hd;
  size_t count, base;  // elements; base: the byte offset of element 0 of this run
  uint64_t tag;
  int p;               // active ranks, a power of two
  std::vector<size_t> first;  // element where block i starts; first[p] = count

  size_t at(int block) const { return first[static_cast<size_t>(block)]; }
  // Sends [send_at, send_end) to `peer` from `from` while receiving [recv_at, recv_end) from it
  // into `into` (at the same offsets).
  void exchange(int peer, Buffer& from, size_t send_at, size_t send_end, Buffer& into, size_t recv_at,
                size_t recv_end) {
    const size_t es = hd.bufs_.esize();
    auto recv = hd.t_.irecv(peer, into, base + recv_at * es, (recv_end - recv_at) * es, tag);
    auto send = hd.t_.isend(peer, from, base + send_at * es, (send_end - send_at) * es, tag);
    const auto wait = transfer_timeout(hd.timeout_, std::max(send_end - send_at, recv_end - recv_at) * es);
    recv->wait(wait);
    send->wait(wait);
  }
};

void HdAllreduce::run_hd(size_t count, size_t offset, uint64_t tag) {
  const int n = t_.size(), r = t_.rank();
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  const size_t es = bufs_.esize();
  Pass pass{*this, count, offset * es, tag, p, {}};
  for (int i = 0; i <= p; ++i) pass.first.push_back(count * static_cast<size_t>(i) / static_cast<size_t>(p));
  const char* in = bufs_.in() + pass.base;
  char* out = bufs_.out() + pass.base;
  char* tmp = bufs_.scratch() + pass.base;
  const bool avg = op_ == ReduceOp::avg;
  // The even ranks below 2·rem hand their input over and wait for the result.
  if (r < 2 * rem && r % 2 == 0) {
    auto give = t_.isend(r + 1, bufs_.in_buf(), pass.base, count * es, tag);
    give->wait(transfer_timeout(timeout_, count * es));  // in place, the result arrives where the input was
    auto back = t_.irecv(r + 1, bufs_.out_buf(), pass.base, count * es, tag);
    back->wait(transfer_timeout(timeout_, 3 * count * es));  // behind the p ranks' halving and doubling
    return;
  }
  bool in_out = bufs_.in() == bufs_.out();  // whether this rank's running sum is in `out` yet
  if (r < 2 * rem) {
    auto from = t_.irecv(r - 1, bufs_.scratch_buf(), pass.base, count * es, tag);
    from->wait(transfer_timeout(timeout_, count * es));
    reduce_sum(dtype_, out, in, tmp, count);
    in_out = true;
  }
  const int me = r < 2 * rem ? r / 2 : r - rem;                  // rank among the p
  auto real = [rem](int v) { return v < rem ? 2 * v + 1 : v + rem; };
  // Reduce-scatter by recursive halving: keep the half of the current range that holds this
  // rank's block, send the other, add the partner's copy of the kept half in.
  int lo = 0, hi = p;  // this rank's blocks still in play
  for (int half = p / 2; half >= 1; half /= 2) {
    const int partner = me ^ half, mid = lo + half;
    const bool lower = me < partner;
    const int keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    const int give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
    pass.exchange(real(partner), in_out ? bufs_.out_buf() : bufs_.in_buf(), pass.at(give_lo), pass.at(give_hi),
                  bufs_.scratch_buf(), pass.at(keep_lo), pass.at(keep_hi));
    const size_t k = pass.at(keep_lo) * es, len = pass.at(keep_hi) - pass.at(keep_lo);
    const char* acc = in_out ? out + k : in + k;
    if (half == 1 && avg)
      reduce_sum_div(dtype_, out + k, acc, tmp + k, len, static_cast<float>(n));
    else
      reduce_sum(dtype_, out + k, acc, tmp + k, len);
    lo = keep_lo;
    hi = keep_hi;
    in_out = true;
  }
  // With one active rank (n = 1 handled above, so p >= 2) this rank now owns block `me` alone.
  // Allgather by recursive doubling: swap owned ranges with the partners in reverse order.
  for (int half = 1; half < p; half *= 2) {
    const int partner = me ^ half;
    const bool lower = me < partner;
    const int other_lo = lower ? hi : lo - (hi - lo), other_hi = lower ? hi + (hi - lo) : lo;
    pass.exchange(real(partner), bufs_.out_buf(), pass.at(lo), pass.at(hi), bufs_.out_buf(), pass.at(other_lo),
                  pass.at(other_hi));
    lo = std::min(lo, other_lo);
    hi = std::max(hi, other_hi);
  }
  if (r < 2 * rem) {  // hand the result back to the even rank below
    auto back = t_.isend(r - 1, bufs_.out_buf(), pass.base, count * es, tag);
    back->wait(transfer_timeout(timeout_, count * es));
  }
}

}  // namespace ringbench
