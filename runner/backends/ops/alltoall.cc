// alltoall: block p of rank r's input ends as block r of rank p's output. The count is each
// rank's whole input (nccl-tests' size column), a multiple of the ranks; each rank sends (n-1)/n
// of it: busbw = algbw × (n-1)/n. Input element r·block + i of rank p is unique per (p, r, i).
#include "collectives/direct_alltoall.h"
#include "collectives/verify.h"
#include "ringbench/config.h"
#include "runner/backends/collective.h"

#if RINGBENCH_HAVE_MPI
#include <mpi.h>
#endif
#if RINGBENCH_HAVE_NCCL
#include "collectives/nccl_comm.h"
#include "cuda/check.h"
#endif

namespace ringbench {
namespace {

CollectiveLayout layout(size_t count, int, int, bool) { return {0, count, 0, count}; }

uint64_t check(DType dtype, const void* result, size_t count, int rank, int n, ReduceOp) {
  const size_t block = count / static_cast<size_t>(n), bytes = block * dtype_size(dtype);
  uint64_t wrong = 0;
  for (int b = 0; b < n; ++b)  // block `rank` of rank b's input, at b x block
    wrong += count_unlike_distinct(dtype, static_cast<const char*>(result) + size_t(b) * bytes, block,
                                   static_cast<size_t>(rank) * block, b, n);
  return wrong;
}

std::unique_ptr<CollectivePlan> ring(Transport& t, const PlanArgs& a) {
  return per_block("direct", a, t.size(), [&](const void* in, void* out, size_t block) {
    return std::make_shared<DirectAlltoall>(t, in, out, block, a.dtype, a.options.ring);
  });
}

#if RINGBENCH_HAVE_MPI
int mpi(const MpiCall& c) {
  return MPI_Alltoall(c.inplace ? MPI_IN_PLACE : c.in, c.block(), MPI_FLOAT, c.out, c.block(), MPI_FLOAT,
                      MPI_COMM_WORLD);
}
#else
constexpr int (*mpi)(const MpiCall&) = nullptr;
#endif

#if RINGBENCH_HAVE_NCCL
// In place, the input is first copied to the spare device buffer (NCCL reads the input while it
// writes the output), inside the timed call, as our in-place alltoall copies its blocks aside.
void nccl(NcclComm& comm, const NcclCall& c) {
  const void* in = c.in;
  if (c.inplace && c.count) {
    RB_CUDA(cudaMemcpyAsync(c.spare, c.out, c.count * dtype_size(c.dtype), cudaMemcpyDeviceToDevice, c.stream));
    in = c.spare;
  }
  comm.alltoall(in, c.out, c.count / static_cast<size_t>(c.ranks), c.dtype, c.stream);
}
#else
constexpr void (*nccl)(NcclComm&, const NcclCall&) = nullptr;
#endif

RINGBENCH_REGISTER_COLLECTIVE(alltoall, {.name = "alltoall",
                                         .order = 50,
                                         .help = "block p of rank r's input to rank p, as its output's block r",
                                         .sockets_per_peer = 1,
                                         .scratch_bytes = [](size_t max_count, size_t esize, int n, const AllreduceOptions&) {
                                           return DirectAlltoall::scratch_bytes(max_count / size_t(n), esize, n, true);
                                         },  // the in-place plan's copy of the blocks it sends
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
