// The MPI baseline: MPI_Allreduce on MPI_COMM_WORLD. Float only (MPI has no half types); avg is
// MPI_SUM then a division. MPI calls have no timeout of their own: a watchdog aborts the job
// when one call takes longer than twice the peer timeout.
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "base/errors.h"
#include "collectives/reduce.h"
#include "ringbench/config.h"
#include "runner/backends/backend.h"
#include "runner/cli/world.h"
#include "base/subprocess.h"

#if RINGBENCH_HAVE_MPI
#include <mpi.h>
#endif

namespace ringbench {
namespace {

std::string unavailable() {
  if (!RINGBENCH_HAVE_MPI) return "this ringbench was built without MPI (RINGBENCH_WITH_MPI=OFF)";
  // Ranks already started (by mpirun, srun, ...) need no mpirun of their own.
  if (!launched_by_mpirun() && !on_path("mpirun")) return "mpirun is not on PATH (apt-get install openmpi-bin)";
  return "";
}

// The MPI path as the environment selects it (pml and btl, "default" when unset).
std::map<std::string, std::string> mpi_path_info() {
  auto env = [](const char* k) { return std::getenv(k) ? std::getenv(k) : "default"; };
  return {{"transport", "mpi"}, {"pml", env("OMPI_MCA_pml")}, {"btl", env("OMPI_MCA_btl")},
          {"btl_tcp_if_include", env("OMPI_MCA_btl_tcp_if_include")}};
}

#if RINGBENCH_HAVE_MPI
class MpiPlan : public AllreducePlan {
 public:
  MpiPlan(const void* in, void* out, size_t max_count, ReduceOp op, std::chrono::milliseconds timeout)
      : in_(in), out_(out), op_(op), timeout_(timeout) {
    if (max_count > static_cast<size_t>(INT_MAX))
      throw Error("MPI_Allreduce takes an int count: at most " + std::to_string(INT_MAX) +
                  " elements, asked for " + std::to_string(max_count));
    watchdog_ = std::thread([this] { watch(); });
  }
  ~MpiPlan() override {
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
    int rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : in, out, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                           MPI_COMM_WORLD);
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
  // A call stuck past the limit aborts the job: mpirun sees a rank exit without MPI_Finalize.
  void watch() {
    std::unique_lock lk(mu_);
    while (!stop_) {
      cv_.wait_for(lk, std::chrono::milliseconds(100));
      if (busy_ && std::chrono::steady_clock::now() - started_ > timeout_) {
        std::cerr << "ringbench: MPI_Allreduce did not return within "
                  << std::chrono::duration<double>(timeout_).count()
                  << " s (a rank is dead, stopped or not calling it): aborting the job\n";
        std::cerr.flush();
        std::_Exit(3);
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

class MpiReducer : public models::GradientReducer {
 public:
  MpiReducer(float* grads, size_t count, std::chrono::milliseconds timeout)
      : plan_(grads, grads, count, ReduceOp::avg, timeout) {}
  void allreduce_avg(size_t offset, size_t count) override { plan_.run(count, true, offset); }
  std::string describe() const override { return "MPI_Allreduce"; }

 private:
  MpiPlan plan_;
};

class MpiCommunicator : public Communicator {
 public:
  explicit MpiCommunicator(std::chrono::milliseconds wait_limit) : wait_limit_(wait_limit) {}
  std::map<std::string, std::string> path_info() const override { return mpi_path_info(); }
  std::unique_ptr<AllreducePlan> allreduce(const void* in, void* out, size_t max_count, DType dtype, ReduceOp op,
                                           const AllreduceOptions&) override {
    if (dtype != DType::f32)
      throw Error(std::string("--impl mpi supports --dtype float only: MPI has no ") + dtype_name(dtype) +
                  " type to reduce");
    return std::make_unique<MpiPlan>(in, out, max_count, op, wait_limit_);
  }
  std::unique_ptr<models::GradientReducer> gradient_reducer(float* grads, size_t count, DType wire) override {
    if (wire != DType::f32)
      throw Error(std::string("gradients as ") + dtype_name(wire) + " on the wire: MPI has no " + dtype_name(wire) +
                  " type to reduce; compressed gradients run on our ring (--transport tcp, verbs or shm)");
    return std::make_unique<MpiReducer>(grads, count, wait_limit_);
  }

 private:
  std::chrono::milliseconds wait_limit_;
};
#endif

Backend mpi() {
  Backend b;
  b.name = "mpi";
  b.order = 40;
  b.needs_mpirun = true;
  b.float_only = true;
  b.title = "MPI_Allreduce";
  b.over = "MPI";
  b.help = "MPI_Allreduce, needs mpirun";
  b.unavailable = unavailable;
  b.make = [](const BackendSetup& s) -> std::unique_ptr<Communicator> {
#if RINGBENCH_HAVE_MPI
    return std::make_unique<MpiCommunicator>(2 * s.timeout);
#else
    (void)s;
    throw Error("--impl mpi is not available: " + unavailable());
#endif
  };
  return b;
}

RINGBENCH_REGISTER_BACKEND(mpi, mpi());

}  // namespace
}  // namespace ringbench
