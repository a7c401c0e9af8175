// Exact verification data for allreduce (used by the tests and by `ringbench allreduce -c`).
// Each rank's input is distinct per (rank, index) and follows no short period, and every
// partial sum is an integer small enough to be exact in the dtype, so any misrouted, dropped
// or doubly-added segment changes the result, and the check is equality, not a tolerance.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/dtype.h"

namespace ringbench {

// Fills `count` elements of rank `rank`'s input for a world of `nranks`.
void fill_input(DType t, void* data, size_t count, int rank, int nranks);
// The value every rank must end with at `index` when `nranks` ranks reduce with `op`.
float expected_value(DType t, size_t index, int nranks, ReduceOp op);
// Number of elements of `data` that differ (bit for bit, after rounding) from the expectation,
// `data` holding the elements from index `first` on.
size_t count_wrong(DType t, const void* data, size_t count, int nranks, ReduceOp op, size_t first = 0);

// The other collectives' checks. What rank `rank`'s input holds at `index` (fill_input's value).
float input_value(DType t, size_t index, int rank, int nranks);
// Elements i of `data` that differ (bit for bit, after rounding to the dtype) from expect(i).
template <class Expect>
size_t count_unlike(DType t, const void* data, size_t count, Expect&& expect);
bool same_in_dtype(DType t, const void* data, size_t i, float expected);

// The collectives that only move data (allgather, alltoall, broadcast) need no exact sums, so
// their values are bit patterns injective in (rank, index) while index * nranks + rank < 2^14
// (half, bfloat16) or 2^30 (float): a swapped block or a rank that kept its own input differs
// everywhere. Past that, a hash of (rank, index) with no period: a block moved by any distance
// differs in all but about 2^-14 (2^-30) of its elements. Never an infinity or NaN. Compared bit
// for bit.
void fill_distinct(DType t, void* data, size_t count, int rank, int nranks);
uint32_t distinct_bits(DType t, size_t index, int rank, int nranks);
// Elements i < count of `data` whose bits are not distinct_bits(first + i, rank, nranks): one
// rank's run of values (a block of a result), checked in one tight loop (gigabytes of it in
// seconds, where a call per element took minutes).
size_t count_unlike_distinct(DType t, const void* data, size_t count, size_t first, int rank, int nranks);

template <class Expect>
size_t count_unlike(DType t, const void* data, size_t count, Expect&& expect) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += !same_in_dtype(t, data, i, expect(i));
  return wrong;
}

}  // namespace ringbench
