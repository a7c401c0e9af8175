// allreduce: every rank ends with the sum (or average) of every rank's input. Each rank sends
// and receives 2(n-1)/n of the data (reduce-scatter, then allgather): busbw = algbw × 2(n-1)/n.
// Every backend has an allreduce of its own (Communicator::allreduce), which training uses too.
#include "collectives/verify.h"
#include "runner/backends/backend.h"

namespace ringbench {
namespace {

CollectiveLayout layout(size_t count, int, int, bool) { return {0, count, 0, count}; }

uint64_t check(DType dtype, const void* result, size_t count, int, int n, ReduceOp op) {
  return count_wrong(dtype, result, count, n, op);
}

std::unique_ptr<CollectivePlan> native(Communicator& comm, const PlanArgs& a) {
  return comm.allreduce(a.in, a.out, a.max_count, a.dtype, a.op, a.options);
}

RINGBENCH_REGISTER_COLLECTIVE(
    allreduce, {.name = "allreduce",
                .order = 10,
                .help = "the sum or average of every rank's input on every rank",
                .reduces = true,
                .takes_algo = true,
                .scratch_bytes = [](size_t max_count, size_t esize, int n, const AllreduceOptions& o) {
                  return 2 * Allreduce::scratch_bytes(max_count, esize, n, o);  // the two plans
                },
                .busbw_factor = [](int n) { return 2.0 * (n - 1) / n; },
                .round_count = keep_count,
                .layout = layout,
                .fill = fill_input,
                .check = check,
                .native = native});

}  // namespace
}  // namespace ringbench
