#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include "base/errors.h"
#include "collectives/reduce.h"
#include "ringbench/config.h"
#include "runner/allreduce_impl.h"

#if RINGBENCH_HAVE_MPI
#include <mpi.h>
#endif

namespace ringbench {

#if RINGBENCH_HAVE_MPI
namespace {

class MpiImpl : public AllreduceImpl {
 public:
  MpiImpl(const void* in, void* out, size_t max_count, ReduceOp op,
          std::chrono::milliseconds timeout)
      : in_(in), out_(out), op_(op), timeout_(timeout) {
    if (max_count > static_cast<size_t>(INT_MAX))
      throw Error("MPI_Allreduce takes an int count: at most " + std::to_string(INT_MAX) +
                  " elements, asked for " + std::to_string(max_count));
    watchdog_ = std::thread([this] { watch(); });
  }
  ~MpiImpl() override {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
  }

  const char* run(size_t count, bool inplace, size_t offset) override {
    const float* in = static_cast<const float*>(in_) + offset;
    float* out = static_cast<float*>(out_) + offset;
    {
      std::lock_guard lk(mu_);
      started_ = std::chrono::steady_clock::now();
      busy_ = true;
    }
    int rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : in, out, static_cast<int>(count),
                           MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    {
      std::lock_guard lk(mu_);
      busy_ = false;
    }
    if (rc != MPI_SUCCESS) {
      char msg[MPI_MAX_ERROR_STRING] = {};
      int len = 0;
      MPI_Error_string(rc, msg, &len);
      throw Error(std::string("MPI_Allreduce failed: ") + msg);
    }
    if (op_ == ReduceOp::avg) {
      int n = 1;
      MPI_Comm_size(MPI_COMM_WORLD, &n);
      divide(DType::f32, out, out, count, static_cast<float>(n));
    }
    return "mpi";
  }

 private:
  // MPI calls have no timeout of their own: a call stuck past the limit aborts the job.
  void watch() {
    std::unique_lock lk(mu_);
    while (!stop_) {
      cv_.wait_for(lk, std::chrono::milliseconds(100));
      if (busy_ && std::chrono::steady_clock::now() - started_ > timeout_) {
        std::cerr << "ringbench: MPI_Allreduce did not return within "
                  << std::chrono::duration<double>(timeout_).count()
                  << " s (a rank is dead, stopped or not calling it): aborting the job\n";
        std::cerr.flush();
        std::_Exit(3);  // mpirun sees a rank exit without MPI_Finalize and ends the job
      }
    }
  }

  const void* in_;
  void* out_;
  ReduceOp op_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, busy_ = false;
  std::chrono::steady_clock::time_point started_;
  std::thread watchdog_;
};

}  // namespace
#endif

std::unique_ptr<AllreduceImpl> make_mpi_impl(const void* in, void* out, size_t max_count,
                                             DType dtype, ReduceOp op,
                                             std::chrono::milliseconds timeout) {
#if RINGBENCH_HAVE_MPI
  if (dtype != DType::f32)
    throw Error(std::string("--impl mpi supports --dtype float only: MPI has no ") +
                dtype_name(dtype) + " type to reduce");
  return std::make_unique<MpiImpl>(in, out, max_count, op, timeout);
#else
  (void)in, (void)out, (void)max_count, (void)dtype, (void)op, (void)timeout;
  throw Error("--impl mpi is not available: this ringbench was built without MPI");
#endif
}

}  // namespace ringbench
