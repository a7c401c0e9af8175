// broadcast: every rank ends with rank 0's input. Every link carries the data once: busbw =
// algbw (nccl-tests). Each rank's input holds values of its own, so a rank that kept its own
// or got another's is caught.
#include <cstring>

#include "collectives/chain_broadcast.h"
#include "collectives/verify.h"
#include "ringbench/config.h"
#include "runner/backends/collective.h"

#if RINGBENCH_HAVE_MPI
#include <mpi.h>
#endif
#if RINGBENCH_HAVE_NCCL
#include "collectives/nccl_comm.h"
#endif

namespace ringbench {
namespace {

CollectiveLayout layout(size_t count, int, int, bool) { return {0, count, 0, count}; }

uint64_t check(DType dtype, const void* result, size_t count, int, int n, ReduceOp) {
  return count_unlike_distinct(dtype, result, count, 0, 0, n);
}

std::unique_ptr<CollectivePlan> ring(Transport& t, const PlanArgs& a) {
  return both_ways("chain", a, [&](const void* in, void* out) {
    auto bc = std::make_shared<ChainBroadcast>(t, in, out, a.max_count, a.dtype, a.options.ring);
    return [bc](size_t count) { bc->run(count); };
  });
}

#if RINGBENCH_HAVE_MPI
int mpi(const MpiCall& c) {
  if (c.rank == 0 && !c.inplace && c.count) std::memcpy(c.out, c.in, c.count * sizeof(float));
  return MPI_Bcast(c.out, static_cast<int>(c.count), MPI_FLOAT, 0, MPI_COMM_WORLD);
}
#else
constexpr int (*mpi)(const MpiCall&) = nullptr;
#endif

#if RINGBENCH_HAVE_NCCL
void nccl(NcclComm& comm, const NcclCall& c) { comm.broadcast(c.in, c.out, c.count, c.dtype, 0, c.stream); }
#else
constexpr void (*nccl)(NcclComm&, const NcclCall&) = nullptr;
#endif

RINGBENCH_REGISTER_COLLECTIVE(broadcast, {.name = "broadcast",
                                          .order = 40,
                                          .help = "rank 0's input on every rank",
                                          .busbw_factor = [](int) { return 1.0; },
                                          .round_count = keep_count,
                                          .layout = layout,
                                          .fill = fill_distinct,
                                          .check = check,
                                          .ring = ring,
                                          .mpi = mpi,
                                          .nccl = nccl});

}  // namespace
}  // namespace ringbench
