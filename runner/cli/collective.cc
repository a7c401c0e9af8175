#include "runner/cli/collective.h"

#include "collectives/verify.h"

namespace ringbench {
namespace {

// Each rank sends and receives 2(n-1)/n of the data: reduce-scatter, then allgather.
double allreduce_busbw_factor(int n) { return 2.0 * (n - 1) / n; }

uint64_t allreduce_check(DType dtype, const void* result, size_t count, int n, ReduceOp op) {
  return count_wrong(dtype, result, count, n, op);
}

std::unique_ptr<AllreducePlan> allreduce_plan(Communicator& comm, const void* in, void* out, size_t max_count,
                                              DType dtype, ReduceOp op, const AllreduceOptions& ring) {
  return comm.allreduce(in, out, max_count, dtype, op, ring);
}

}  // namespace

const Collective& allreduce_collective() {
  static const Collective c{"allreduce", allreduce_busbw_factor, fill_input, allreduce_check, allreduce_plan};
  return c;
}

}  // namespace ringbench
