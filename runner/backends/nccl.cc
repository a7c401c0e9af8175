// The GPU baseline: NCCL on device buffers, one GPU per rank, the communicator bootstrapped
// through our store (rank 0 publishes NCCL's unique id): ncclAllReduce, and each other
// collective's own NCCL call (its descriptor's `nccl`: ncclAllGather, ncclReduceScatter,
// ncclBroadcast, grouped ncclSend/ncclRecv for alltoall). avg is a sum then a division on the
// device (exact, as the check wants). Every wait is bounded (the communicator is aborted past
// twice the peer timeout).
#include <algorithm>

#include "base/errors.h"
#include "ringbench/config.h"
#include "runner/backends/backend.h"
#include "runner/job/gpu.h"

#if RINGBENCH_HAVE_NCCL
#include "collectives/nccl_comm.h"
#include "cuda/memory.h"
#include "models/cuda/gpu_reducers.h"
#endif

namespace ringbench {
namespace {

#if RINGBENCH_HAVE_NCCL
// `ringbench <collective>` hands host buffers: the plan mirrors them on the device, and times
// the device buffers only. `coll`: the collective's NCCL call; null: ncclAllReduce.
class NcclPlan : public AllreducePlan {
 public:
  NcclPlan(NcclComm& comm, const void* in, void* out, size_t max_count, DType dtype, ReduceOp op,
           const Collective* coll = nullptr)
      : host_in_(static_cast<const char*>(in)), host_out_(static_cast<char*>(out)), dtype_(dtype), op_(op),
        esize_(dtype_size(dtype)), dev_in_(std::max<size_t>(max_count * esize_, 64), "nccl input"),
        dev_out_(std::max<size_t>(max_count * esize_, 64), "nccl output"), comm_(comm), coll_(coll) {}

  const char* run(size_t count, bool inplace, size_t offset) override {
    char* out = dev_out_.data() + offset * esize_;
    const char* in = inplace ? out : dev_in_.data() + offset * esize_;
    if (coll_)  // returns once it has run, as allreduce()
      coll_->nccl(comm_, {in, out, dev_in_.data(), count, inplace, dtype_, op_, comm_.rank(), comm_.size(), stream_.get()});
    else
      comm_.allreduce(in, out, count, dtype_, op_, stream_.get());
    return "nccl";
  }
  void load_input(size_t count, bool inplace) override {
    copy(inplace ? dev_out_.data() : dev_in_.data(), inplace ? host_out_ : host_in_, count * esize_,
         cudaMemcpyHostToDevice);
  }
  void fetch_result(size_t count) override { copy(host_out_, dev_out_.data(), count * esize_, cudaMemcpyDeviceToHost); }

 private:
  void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (!bytes) return;
    RB_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, stream_.get()));
    stream_.sync();
  }

  const char* host_in_;
  char* host_out_;
  DType dtype_;
  ReduceOp op_;
  size_t esize_;
  cuda::DeviceArray<char> dev_in_, dev_out_;
  cuda::Stream stream_;
  NcclComm& comm_;
  const Collective* coll_;
};

class NcclCommunicator : public Communicator {
 public:
  explicit NcclCommunicator(const BackendSetup& s)
      : comm_(s.store, s.key_prefix + "/nccl_unique_id", s.rank, s.size, 2 * s.timeout) {}
  std::map<std::string, std::string> path_info() const override { return comm_.path_info(); }
  std::unique_ptr<AllreducePlan> allreduce(const void* in, void* out, size_t max_count, DType dtype, ReduceOp op,
                                           const AllreduceOptions&) override {
    return std::make_unique<NcclPlan>(comm_, in, out, max_count, dtype, op);
  }
  std::unique_ptr<CollectivePlan> plan(const Collective& c, const PlanArgs& a) override {
    if (!c.nccl) throw Error("--impl nccl: " + c.name + " has no NCCL call");  // every one has (nccl_test)
    return std::make_unique<NcclPlan>(comm_, a.in, a.out, a.max_count, a.dtype, a.op, &c);
  }
  std::unique_ptr<models::GradientReducer> gradient_reducer(float* grads, size_t count, DType wire) override {
    if (wire != DType::f32)
      throw Error(std::string("gradients as ") + dtype_name(wire) + " on the wire: not built for nccl yet; "
                  "compressed gradients run on our ring (--transport tcp, verbs or shm)");
    return models::make_nccl_reducer(comm_, grads, count);
  }

 private:
  NcclComm comm_;
};
#endif

Backend nccl() {
  Backend b;
  b.name = "nccl";
  b.order = 50;
  b.gpu_buffers = true;
  b.title = "ncclAllReduce";
  b.over = "NCCL (GPU buffers)";
  b.help = "NCCL's own collective, e.g. ncclAllReduce or ncclAllGather, on GPU buffers; one GPU per rank";
  b.unavailable = nccl_unavailable_reason;  // not built, or no GPU here
  // To NCCL every rank of an emulated cluster is on one host (same hostname and boot id), so it
  // would move data through shared memory or GPU peer copies, bypassing the shaped link.
  b.node_env = [](const std::string& host_id, const std::string& iface) {
    return std::vector<std::string>{"NCCL_HOSTID=" + host_id, "NCCL_SOCKET_IFNAME=" + iface, "NCCL_IB_DISABLE=1"};
  };
  b.make = [](const BackendSetup& s) -> std::unique_ptr<Communicator> {
#if RINGBENCH_HAVE_NCCL
    return std::make_unique<NcclCommunicator>(s);
#else
    (void)s;
    throw Error("--impl nccl is not available: " + nccl_unavailable_reason());
#endif
  };
  return b;
}

RINGBENCH_REGISTER_BACKEND(nccl, nccl());

}  // namespace
}  // namespace ringbench
