// A benchmarked collective, nccl-tests style: what `ringbench <collective>` needs to know about
// the operation it times, in one small descriptor — its name, where its input and output lie in
// the two buffers, the test data (values unique per (rank, index), so a misrouted block is
// caught), the exact check of a result, the bus-bandwidth factor (busbw = algbw × factor, as
// nccl-tests' PERFORMANCE.md defines it), and how each kind of backend runs it: our algorithm
// over a Transport, the MPI call, the NCCL call. The sweep itself (sizes, timing, rows, JSON) is
// shared.
//
// Each collective is one file of runner/backends/ops/ that registers its descriptor at static
// initialization (RINGBENCH_REGISTER_COLLECTIVE), as the backends do: `ringbench <name>` is
// then a command, and nothing else spells its name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/allreduce.h"
#include "collectives/dtype.h"
#include "collectives/transport.h"

struct CUstream_st;  // a cudaStream_t

namespace ringbench {

class Communicator;
class NcclComm;

// One collective of fixed buffers, set up once for the largest count; only run() is timed.
class CollectivePlan {
 public:
  virtual ~CollectivePlan() = default;
  // Out of place from `in` to `out`; in place within `out` (the descriptor's layout says where
  // the input and the result lie). `count` elements as the sweep counts them (the descriptor's
  // layout), [offset, offset + count) for an allreduce. Returns the algorithm that ran ("ring",
  // "direct", "mpi", ...).
  virtual const char* run(size_t count, bool inplace, size_t offset = 0) = 0;
  // Backends of device buffers (nccl) copy elements [0, count) of the host input (the host
  // `out` when in place) to the device before a checked run, and the result back after it;
  // the timed runs work on whatever the device holds. Host backends need neither.
  virtual void load_input(size_t /*count*/, bool /*inplace*/) {}
  virtual void fetch_result(size_t /*count*/) {}
};
using AllreducePlan = CollectivePlan;

// A plan of a host algorithm made once per buffer pair: make(in, out) gives the Algo (anything
// with run(count, offset)) for out of place, make(out, out) the one for in place.
template <class Algo>
class InAndOutOfPlacePlan : public CollectivePlan {
 public:
  template <class Make>
  InAndOutOfPlacePlan(const void* in, void* out, Make make) : out_of_place_(make(in, out)), in_place_(make(out, out)) {}
  const char* run(size_t count, bool inplace, size_t offset) override {
    return (inplace ? in_place_ : out_of_place_).run(count, offset);
  }

 private:
  Algo out_of_place_, in_place_;
};

// What a plan is made for: two host buffers of `max_count` elements each.
struct PlanArgs {
  const void* in;
  void* out;
  size_t max_count;
  DType dtype;
  ReduceOp op;
  AllreduceOptions options;  // our algorithms' (segments, depth, timeout; --algo for allreduce)
};

// Where one rank's input and result lie for a sweep point of `count` elements, in elements:
// out of place the input is in the input buffer, in place in the output buffer.
struct CollectiveLayout {
  size_t in_offset, in_count, out_offset, out_count;
};

// One MPI call of the MPI baseline (float only).
struct MpiCall {
  const void* in;  // the input buffer; in place, the output buffer
  void* out;
  size_t count;    // the sweep's count
  bool inplace;
  ReduceOp op;
  int rank, ranks;
  int block() const { return static_cast<int>(count / static_cast<size_t>(ranks)); }  // per rank
};

// One NCCL call of the NCCL baseline, on device buffers of the plan's largest count, laid out
// as the descriptor's layout says (in place: `in` is `out`).
struct NcclCall {
  const void* in;
  void* out;
  void* spare;     // a device buffer as large, unused by the layout in place (alltoall copies its input there)
  size_t count;    // the sweep's count
  bool inplace;
  DType dtype;
  ReduceOp op;
  int rank, ranks;
  CUstream_st* stream;
};

struct Collective {
  std::string name;  // `ringbench <name>`
  int order = 0;     // where it sorts in help
  std::string help;  // the command's --help line
  bool reduces = false;   // --op applies
  bool takes_algo = false;  // --algo chooses among our algorithms
  // The command's default --sockets-per-peer over TCP. Alltoall talks to every peer at once, so
  // it has a flow per peer already; a second socket per peer only adds flows to each link
  // (results/collectives-1gbit-20261130: one is 1.06-1.36x two by medians on 1 Gbit/s links).
  int sockets_per_peer = 2;
  // Our algorithm's scratch in bytes for messages of up to `max_count` elements of `esize` bytes
  // over `ranks` ranks, its two plans (out of place and in place) together: what a rank holds
  // beyond the input and output buffers (the algorithms' own scratch_bytes(), which their
  // constructors allocate by). Null: none.
  size_t (*scratch_bytes)(size_t max_count, size_t esize, int ranks, const AllreduceOptions& o) = nullptr;
  double (*busbw_factor)(int ranks) = nullptr;
  // The largest count <= `count` it runs (a multiple of the ranks where blocks are per rank).
  size_t (*round_count)(size_t count, int ranks) = nullptr;
  CollectiveLayout (*layout)(size_t count, int rank, int ranks, bool inplace) = nullptr;
  // This rank's input of `in_count` elements, at the layout's in_offset.
  void (*fill)(DType dtype, void* input, size_t in_count, int rank, int ranks) = nullptr;
  // Elements of this rank's result (at the layout's out_offset) that are not exactly what they must be.
  uint64_t (*check)(DType dtype, const void* result, size_t out_count, int rank, int ranks, ReduceOp op) = nullptr;
  // Our algorithm over a transport.
  std::unique_ptr<CollectivePlan> (*ring)(Transport& t, const PlanArgs& a) = nullptr;
  // The MPI call (returns MPI's error code); null where MPI is not built.
  int (*mpi)(const MpiCall& call) = nullptr;
  // The NCCL call (returns once its result is final on the device; throws as NcclComm does);
  // null where NCCL is not built.
  void (*nccl)(NcclComm& comm, const NcclCall& call) = nullptr;
  // Where every backend has a way of its own (allreduce: Communicator::allreduce), that; else
  // the backend runs `ring`, `mpi` or `nccl` (Communicator::plan).
  std::unique_ptr<CollectivePlan> (*native)(Communicator& comm, const PlanArgs& a) = nullptr;
};

bool register_collective(Collective c);
#define RINGBENCH_REGISTER_COLLECTIVE(ident, ...) \
  [[maybe_unused]] static const bool ident##_collective_registered = ::ringbench::register_collective(__VA_ARGS__)

// Every registered collective, in `order`.
const std::vector<const Collective*>& collectives();
const Collective& find_collective(const std::string& name);  // an Error naming the known ones

// A plan of our algorithm twice: out of place (in -> out) and in place (out -> out); `make`
// returns the run of one algorithm object set up for one pair of buffers.
class BothWaysPlan : public CollectivePlan {
 public:
  using Run = std::function<void(size_t count)>;
  BothWaysPlan(const char* algo, Run out_of_place, Run in_place)
      : algo_(algo), out_of_place_(std::move(out_of_place)), in_place_(std::move(in_place)) {}
  const char* run(size_t count, bool inplace, size_t) override {
    (inplace ? in_place_ : out_of_place_)(count);
    return algo_;
  }

 private:
  const char* algo_;
  Run out_of_place_, in_place_;
};

template <class Make>
std::unique_ptr<CollectivePlan> both_ways(const char* algo, const PlanArgs& a, Make make) {
  return std::make_unique<BothWaysPlan>(algo, make(a.in, a.out), make(a.out, a.out));
}

// both_ways for an algorithm on blocks of count / N elements (allgather, reduce-scatter,
// alltoall): `make(in, out, max_block)` returns a shared object whose run() takes a block's count.
template <class Make>
std::unique_ptr<CollectivePlan> per_block(const char* algo, const PlanArgs& a, int ranks, Make make) {
  const size_t n = static_cast<size_t>(ranks);
  return both_ways(algo, a, [&](const void* in, void* out) {
    auto one = make(in, out, a.max_count / n);
    return [one, n](size_t count) { one->run(count / n); };
  });
}

// Layouts and checks the collectives share.
size_t round_to_ranks(size_t count, int ranks);  // nccl-tests' rounding: a multiple of the ranks
size_t keep_count(size_t count, int ranks);      // no rounding

}  // namespace ringbench
