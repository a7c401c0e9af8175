// The MPI baseline: MPI_Allreduce on MPI_COMM_WORLD (and each collective's own MPI call,
// runner/backends/ops/). Float only (MPI has no half types); avg is
// MPI_SUM then a division. MPI calls have no timeout of their own: a watchdog aborts the job
// when one call takes longer than twice the peer timeout.
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <functional>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "base/errors.h"
#include "collectives/reduce.h"
#include "ringbench/config.h"
#include "runner/backends/backend.h"
#include "runner/job/world.h"
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
// One MPI collective call, timed by the sweep; a watchdog bounds it.
class MpiPlan : public CollectivePlan {
 public:
  using Call = std::function<int(size_t count, bool inplace, size_t offset)>;
  MpiPlan(std::string what, Call call, size_t max_count, std::chrono::milliseconds timeout)
      : what_(std::move(what)), call_(std::move(call)), timeout_(timeout) {
    if (max_count > static_cast<size_t>(INT_MAX))
      throw Error(what_ + " takes an int count: at most " + std::to_string(INT_MAX) + " elements, asked for " +
                  std::to_string(max_count));
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
    {
      std::lock_guard lk(mu_);
      started_ = std::chrono::steady_clock::now();
      busy_ = true;
    }
    const int rc = call_(count, inplace, offset);
    {
      std::lock_guard lk(mu_);
      busy_ = false;
    }
    if (rc != MPI_SUCCESS) {
      char msg[MPI_MAX_ERROR_STRING] = {};
      int len = 0;
      MPI_Error_string(rc, msg, &len);
      throw Error(what_ + " failed: " + msg);
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
        std::cerr << "ringbench: " << what_ << " did not return within "
                  << std::chrono::duration<double>(timeout_).count()
                  << " s (a rank is dead, stopped or not calling it): aborting the job\n";
        std::cerr.flush();
        std::_Exit(3);
      }
    }
  }

  std::string what_;
  Call call_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, busy_ = false;
  std::chrono::steady_clock::time_point started_;
  std::thread watchdog_;
};

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// MPI_Allreduce of [offset, offset + count); avg is MPI_SUM then a division.
MpiPlan::Call mpi_allreduce(const void* in_, void* out_, ReduceOp op) {
  return [in_, out_, op](size_t count, bool inplace, size_t offset) {
    const float* in = static_cast<const float*>(in_) + offset;
    float* out = static_cast<float*>(out_) + offset;
    const int rc = MPI_Allreduce(inplace ? MPI_IN_PLACE : in, out, static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS && op == ReduceOp::avg) divide(DType::f32, out, out, count, static_cast<float>(world_size()));
    return rc;
  };
}

std::unique_ptr<MpiPlan> allreduce_plan(const void* in, void* out, size_t max_count, ReduceOp op,
                                        std::chrono::milliseconds timeout) {
  return std::make_unique<MpiPlan>("MPI_Allreduce", mpi_allreduce(in, out, op), max_count, timeout);
}

class MpiReducer : public models::GradientReducer {
 public:
  MpiReducer(float* grads, size_t count, std::chrono::milliseconds timeout)
      : plan_(allreduce_plan(grads, grads, count, ReduceOp::avg, timeout)) {}
  void allreduce_avg(size_t offset, size_t count) override { plan_->run(count, true, offset); }
  std::string describe() const override { return "MPI_Allreduce"; }

 private:
  std::unique_ptr<MpiPlan> plan_;
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
    return allreduce_plan(in, out, max_count, op, wait_limit_);
  }
  std::unique_ptr<CollectivePlan> plan(const Collective& c, const PlanArgs& a) override {
    if (!c.mpi) throw Error("--impl mpi has no " + c.name);
    if (a.dtype != DType::f32)
      throw Error(std::string("--impl mpi supports --dtype float only: MPI has no ") + dtype_name(a.dtype) +
                  " type to reduce");
    const int rank = [] { int r = 0; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }();
    auto call = [&c, a, rank, n = world_size()](size_t count, bool inplace, size_t) {
      return c.mpi({inplace ? a.out : a.in, a.out, count, inplace, a.op, rank, n});
    };
    return std::make_unique<MpiPlan>("MPI " + c.name, call, a.max_count, wait_limit_);
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
  b.help = "MPI's own collective, e.g. MPI_Allreduce or MPI_Allgather; needs mpirun";
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
