#include "models/cuda/gpu_reducers.h"

#include <stdexcept>

#include "collectives/staged_allreduce.h"
#include "ringbench/config.h"

#if RINGBENCH_HAVE_NCCL
#include "collectives/nccl_comm.h"
#endif

namespace ringbench::models {
namespace {

class StagedReducer : public GradientReducer {
 public:
  StagedReducer(float* grads, size_t count, const ReducerFactory& host, size_t piece_bytes)
      : ar_(grads, count, DType::f32,
            [&](void* pinned) -> HostAllreduce {
              // Owned by the staged allreduce, so it goes before the pinned memory it registered.
              std::shared_ptr<GradientReducer> r = host(static_cast<float*>(pinned), count);
              if (!r || r->on_device())
                throw std::invalid_argument("a staged reducer needs a reducer of host memory");
              host_name_ = r->describe();
              return [r](size_t c, size_t offset) { r->allreduce_avg(offset, c); };
            },
            {.piece_bytes = piece_bytes}),
        name_(host_name_ + ", " + ar_.describe()) {}
  void allreduce_avg(size_t offset, size_t count) override { ar_.run(count, offset); }
  std::string describe() const override { return name_; }
  bool on_device() const override { return true; }
  void* stream() const override { return ar_.stream(); }

 private:
  std::string host_name_;  // before ar_: set while ar_ is made
  StagedAllreduce ar_;
  std::string name_;
};

#if RINGBENCH_HAVE_NCCL
class NcclReducer : public GradientReducer {
 public:
  NcclReducer(NcclComm& comm, float* grads, size_t count) : comm_(comm), grads_(grads), count_(count) {}
  void allreduce_avg(size_t offset, size_t count) override {
    if (count > count_ || offset > count_ - count)
      throw std::out_of_range("NCCL reducer: gradient range past the buffer");
    // Returns once the average is on the device (or throws, the communicator aborted).
    comm_.allreduce(grads_ + offset, grads_ + offset, count, DType::f32, ReduceOp::avg, stream_.get());
  }
  std::string describe() const override {
    return "NCCL " + nccl_version() + " ncclAllReduce (sum, then / " + std::to_string(comm_.size()) + ")";
  }
  bool on_device() const override { return true; }
  void* stream() const override { return stream_.get(); }

 private:
  NcclComm& comm_;
  float* grads_;
  size_t count_;
  cuda::Stream stream_;
};
#endif

}  // namespace

std::unique_ptr<GradientReducer> make_staged_reducer(float* device_grads, size_t count,
                                                     const ReducerFactory& host, size_t piece_bytes) {
  return std::make_unique<StagedReducer>(device_grads, count, host, piece_bytes);
}

#if RINGBENCH_HAVE_NCCL
std::unique_ptr<GradientReducer> make_nccl_reducer(NcclComm& comm, float* device_grads, size_t count) {
  return std::make_unique<NcclReducer>(comm, device_grads, count);
}
#endif

}  // namespace ringbench::models
