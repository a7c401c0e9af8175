// reducescatter: rank r ends with block r of the sum (or average) of every rank's input. The
// count is each rank's whole input (nccl-tests' size column), a multiple of the ranks; each rank
// sends (n-1)/n of it: busbw = algbw × (n-1)/n. In place, the result lands at out + r × block
// (NCCL's in-place layout).
#include <cstring>

#include "collectives/reduce.h"
#include "collectives/ring_reducescatter.h"
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
  return {0, count, inplace ? static_cast<size_t>(rank) * block : 0, block};
}

uint64_t check(DType dtype, const void* result, size_t block, int rank, int n, ReduceOp op) {
  const size_t first = static_cast<size_t>(rank) * block;
  return count_wrong(dtype, result, block, n, op, first);
}

std::unique_ptr<CollectivePlan> ring(Transport& t, const PlanArgs& a) {
  return per_block("ring", a, t.size(), [&](const void* in, void* out, size_t block) {
    return std::make_shared<RingReduceScatter>(t, in, out, block, a.dtype, a.op, a.options.ring);
  });
}

#if RINGBENCH_HAVE_MPI
// MPI_IN_PLACE leaves the result at the start of the buffer: moved to NCCL's place, in the time.
int mpi(const MpiCall& c) {
  const size_t block = c.count / static_cast<size_t>(c.ranks);
  float* out = static_cast<float*>(c.out);
  const int rc = MPI_Reduce_scatter_block(c.inplace ? MPI_IN_PLACE : c.in, out, static_cast<int>(block), MPI_FLOAT,
                                          MPI_SUM, MPI_COMM_WORLD);
  float* result = c.inplace ? out + static_cast<size_t>(c.rank) * block : out;
  if (result != out && block) std::memmove(result, out, block * sizeof(float));
  if (rc == MPI_SUCCESS && c.op == ReduceOp::avg) divide(DType::f32, result, result, block, float(c.ranks));
  return rc;
}
#else
constexpr int (*mpi)(const MpiCall&) = nullptr;
#endif

#if RINGBENCH_HAVE_NCCL
// In place, the result lands at out + rank x block (NCCL's in-place layout, and ours).
void nccl(NcclComm& comm, const NcclCall& c) {
  const size_t block = c.count / static_cast<size_t>(c.ranks);
  char* out = static_cast<char*>(c.out) + (c.inplace ? static_cast<size_t>(c.rank) * block * dtype_size(c.dtype) : 0);
  comm.reducescatter(c.in, out, block, c.dtype, c.op, c.stream);
}
#else
constexpr void (*nccl)(NcclComm&, const NcclCall&) = nullptr;
#endif

RINGBENCH_REGISTER_COLLECTIVE(
    reducescatter, {.name = "reducescatter",
                    .order = 30,
                    .help = "block r of the sum or average of every rank's input on rank r",
                    .reduces = true,
                    .scratch_bytes = [](size_t max_count, size_t esize, int n, const AllreduceOptions& o) {
                      return 2 * RingReduceScatter::scratch_bytes(max_count / size_t(n), esize, n, o.ring);  // two plans
                    },
                    .busbw_factor = [](int n) { return double(n - 1) / n; },
                    .round_count = round_to_ranks,
                    .layout = layout,
                    .fill = fill_input,
                    .check = check,
                    .ring = ring,
                    .mpi = mpi,
                    .nccl = nccl});

}  // namespace
}  // namespace ringbench
