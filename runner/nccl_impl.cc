#include <algorithm>

#include "base/errors.h"
#include "ringbench/config.h"
#include "runner/allreduce_impl.h"
#include "runner/gpu.h"

#if RINGBENCH_HAVE_NCCL
#include "collectives/nccl_comm.h"
#include "cuda/memory.h"
#endif

namespace ringbench {

#if RINGBENCH_HAVE_NCCL
namespace {

class NcclImpl : public AllreduceImpl {
 public:
  NcclImpl(Store& store, int rank, int n, const void* in, void* out, size_t max_count, DType dtype,
           ReduceOp op, std::chrono::milliseconds timeout)
      : host_in_(static_cast<const char*>(in)), host_out_(static_cast<char*>(out)), dtype_(dtype),
        op_(op), esize_(dtype_size(dtype)),
        dev_in_(std::max<size_t>(max_count * esize_, 64), "nccl input"),
        dev_out_(std::max<size_t>(max_count * esize_, 64), "nccl output"),
        comm_(store, "allreduce/nccl_unique_id", rank, n, timeout) {}

  const char* run(size_t count, bool inplace, size_t offset) override {
    char* out = dev_out_.data() + offset * esize_;
    const char* in = inplace ? out : dev_in_.data() + offset * esize_;
    comm_.allreduce(in, out, count, dtype_, op_, stream_.get());  // returns once it has run
    return "nccl";
  }
  void load_input(size_t count, bool inplace) override {
    copy(inplace ? dev_out_.data() : dev_in_.data(), inplace ? host_out_ : host_in_, count * esize_,
         cudaMemcpyHostToDevice);
  }
  void fetch_result(size_t count) override {
    copy(host_out_, dev_out_.data(), count * esize_, cudaMemcpyDeviceToHost);
  }
  std::map<std::string, std::string> path_info() const { return comm_.path_info(); }

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
  NcclComm comm_;
};

}  // namespace
#endif

std::unique_ptr<AllreduceImpl> make_nccl_impl(Store& store, int rank, int n, const void* in, void* out,
                                              size_t max_count, DType dtype, ReduceOp op,
                                              std::chrono::milliseconds timeout,
                                              std::map<std::string, std::string>* path) {
  if (const std::string why = nccl_unavailable_reason(); !why.empty())
    throw Error("--impl nccl is not available: " + why);
#if RINGBENCH_HAVE_NCCL
  auto impl = std::make_unique<NcclImpl>(store, rank, n, in, out, max_count, dtype, op, timeout);
  if (path) *path = impl->path_info();
  return impl;
#else
  (void)store, (void)rank, (void)n, (void)in, (void)out, (void)max_count, (void)dtype, (void)op,
      (void)timeout, (void)path;
  throw Error("--impl nccl is not available");
#endif
}

}  // namespace ringbench
