// allgather: every rank ends with every rank's block, in rank order. The count is the gathered
// total (nccl-tests' size column), a multiple of the ranks; each rank receives (n-1)/n of it:
// busbw = algbw × (n-1)/n. In place, a rank's block is already at its place in the output.
#include "collectives/ring_allgather.h"
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

CollectiveLayout layout(size_t count, int rank, int n, bool inplace) {
  const size_t block = count / static_cast<size_t>(n);
  return {inplace ? static_cast<size_t>(rank) * block : 0, block, 0, count};
}

uint64_t check(DType dtype, const void* result, size_t count, int, int n, ReduceOp) {
  const size_t block = count / static_cast<size_t>(n), bytes = block * dtype_size(dtype);
  uint64_t wrong = 0;
  for (int b = 0; b < n; ++b)  // rank b's input, at b x block
    wrong += count_unlike_distinct(dtype, static_cast<const char*>(result) + size_t(b) * bytes, block, 0, b, n);
  return wrong;
}

std::unique_ptr<CollectivePlan> ring(Transport& t, const PlanArgs& a) {
  return per_block("ring", a, t.size(), [&](const void* in, void* out, size_t block) {
    return std::make_shared<RingAllgather>(t, in, out, block, a.dtype, a.options.ring);
  });
}

#if RINGBENCH_HAVE_MPI
int mpi(const MpiCall& c) {
  return MPI_Allgather(c.inplace ? MPI_IN_PLACE : c.in, c.block(), MPI_FLOAT, c.out, c.block(), MPI_FLOAT,
                       MPI_COMM_WORLD);
}
#else
constexpr int (*mpi)(const MpiCall&) = nullptr;
#endif

#if RINGBENCH_HAVE_NCCL
// In place, this rank's block already lies at its place in the output (NCCL's in-place layout).
void nccl(NcclComm& comm, const NcclCall& c) {
  const size_t block = c.count / static_cast<size_t>(c.ranks);
  const void* in =
      c.inplace ? static_cast<const char*>(c.out) + static_cast<size_t>(c.rank) * block * dtype_size(c.dtype) : c.in;
  comm.allgather(in, c.out, block, c.dtype, c.stream);
}
#else
constexpr void (*nccl)(NcclComm&, const NcclCall&) = nullptr;
#endif

RINGBENCH_REGISTER_COLLECTIVE(
    allgather, {.name = "allgather",
                .order = 20,
                .help = "every rank's block on every rank, in rank order",
                .busbw_factor = [](int n) { return double(n - 1) / n; },
                .round_count = round_to_ranks,
                .layout = layout,
                .fill = fill_distinct,
                .check = check,
                .ring = ring,
                .mpi = mpi,
                .nccl = nccl});

}  // namespace
}  // namespace ringbench
