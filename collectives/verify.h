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
// Number of elements of `data` that differ (bit for bit, after rounding) from the expectation.
size_t count_wrong(DType t, const void* data, size_t count, int nranks, ReduceOp op);

}  // namespace ringbench
