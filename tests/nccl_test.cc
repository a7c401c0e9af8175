// The NCCL baseline (label gpu): the communicator bootstrapped through our store, allreduces on
// device buffers checked exactly (collectives/verify.h), every other collective's NCCL call
// through its descriptor, a missing rank as a timeout rather than a hang, and NCCL as the
// trainer's gradient reducer. NCCL needs one GPU per rank: the
// multi-rank tests skip on a machine with fewer GPUs than ranks; every test skips, with the
// reason, where there is no usable GPU.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "base/errors.h"
#include "collectives/nccl_comm.h"
#include "collectives/store.h"
#include "collectives/verify.h"
#include "cuda/device.h"
#include "cuda/memory.h"
#include "models/cuda/gpu_reducers.h"
#include "models/trainer.h"
#include "models/zoo.h"
#include "rank_threads.h"
#include "runner/backends/backend.h"
#include "runner/backends/collective.h"

namespace m = ringbench::models;
namespace cu = ringbench::cuda;
using ringbench::DType;
using ringbench::ReduceOp;
using namespace std::chrono_literals;

namespace {

// cudaMemcpy from pageable memory may return before the copy has reached the device, and the
// code under test runs on non-blocking streams, which do not wait for the legacy default
// stream: wait for it.
void to_device(void* dst, const void* src, size_t bytes) {
  ASSERT_EQ(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(0), cudaSuccess);
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

// n ranks as threads, rank r on device r, one store; rethrows the first rank's exception.
void run_nccl_ranks(int n, const std::function<void(ringbench::NcclComm&)>& body,
                    std::chrono::milliseconds timeout = 60s) {
  ringbench::InProcStore store;
  ringbench::testing::run_threads(n, [&](int r) {
    if (cudaSetDevice(r) != cudaSuccess) throw std::runtime_error("cudaSetDevice failed");
    ringbench::NcclComm comm(store, "test/nccl_id", r, n, timeout);
    body(comm);
  });
}

// Every dtype and op, out of place and in place, sizes from 0 to a few MiB: exactly the
// expected values, on every rank.
void check_exact(ringbench::NcclComm& comm) {
  const int n = comm.size(), rank = comm.rank();
  cu::Stream stream;
  const size_t max_count = (size_t(2) << 20) + 3;
  cu::DeviceArray<char> in(max_count * 4, "test"), out(max_count * 4, "test");
  std::vector<char> host(max_count * 4);
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      for (size_t count : {size_t(0), size_t(1), size_t(4097), max_count}) {
        for (bool inplace : {false, true}) {
          const size_t bytes = count * ringbench::dtype_size(t);
          ringbench::fill_input(t, host.data(), count, rank, n);
          char* dst = inplace ? out.data() : in.data();
          if (bytes) {
            to_device(dst, host.data(), bytes);
          }
          comm.allreduce(dst, out.data(), count, t, op, stream.get());
          if (bytes) {
            ASSERT_EQ(cudaMemcpy(host.data(), out.data(), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
          }
          EXPECT_EQ(ringbench::count_wrong(t, host.data(), count, n, op), 0u)
              << "rank " << rank << " of " << n << ", " << ringbench::dtype_name(t) << " "
              << ringbench::op_name(op) << ", count " << count << (inplace ? ", in place" : "");
        }
      }
    }
  }
}

// Every collective's NCCL call but allreduce's (check_exact's) through its descriptor (runner/
// backends/ops/), as `ringbench <op> --impl nccl -c 1` runs it: the descriptor's input, layout
// and check, the result's place poisoned first, in and out of place, f32 and f16, sum and avg
// where it reduces, counts 0 to a few thousand elements a rank.
void check_collectives(ringbench::NcclComm& comm) {
  const int n = comm.size(), rank = comm.rank();
  cu::Stream stream;
  const size_t max_count = 4099 * size_t(n);
  cu::DeviceArray<char> in(max_count * 4, "test"), out(max_count * 4, "test");
  std::vector<char> host(max_count * 4);
  for (const ringbench::Collective* c : ringbench::collectives()) {
    if (c->native) continue;
    ASSERT_NE(c->nccl, nullptr) << c->name;
    for (DType t : {DType::f32, DType::f16})
      for (ReduceOp op : c->reduces ? std::vector{ReduceOp::sum, ReduceOp::avg} : std::vector{ReduceOp::sum})
        for (size_t raw : {size_t(0), size_t(n), max_count})
          for (bool inplace : {false, true}) {
            const size_t count = c->round_count(raw, n), es = ringbench::dtype_size(t);
            const ringbench::CollectiveLayout at = c->layout(count, rank, n, inplace);
            std::memset(host.data(), 0xff, host.size());  // NaN wherever the input is not
            c->fill(t, host.data() + at.in_offset * es, at.in_count, rank, n);
            ASSERT_EQ(cudaMemset(out.data(), 0xff, max_count * es), cudaSuccess);
            ASSERT_EQ(cudaStreamSynchronize(0), cudaSuccess);
            if (count) to_device(inplace ? out.data() : in.data(), host.data(), count * es);
            c->nccl(comm, {inplace ? out.data() : in.data(), out.data(), in.data(), count, inplace, t, op, rank, n,
                           stream.get()});
            if (count) {
              ASSERT_EQ(cudaMemcpy(host.data(), out.data(), count * es, cudaMemcpyDeviceToHost), cudaSuccess);
            }
            EXPECT_EQ(c->check(t, host.data() + at.out_offset * es, at.out_count, rank, n, op), 0u)
                << c->name << " rank " << rank << " of " << n << ", " << ringbench::dtype_name(t) << " "
                << ringbench::op_name(op) << ", count " << count << (inplace ? ", in place" : "");
          }
  }
}

}  // namespace

// Where NCCL is built, every collective runs over it: its descriptor has an NCCL call and the
// nccl backend lacks none (a sweep would skip its points otherwise). No GPU needed.
TEST(NcclCollectives, EveryCollectiveHasItsNcclCall) {
  const ringbench::Backend* nccl = ringbench::find_backend("nccl");
  ASSERT_NE(nccl, nullptr);
  for (const ringbench::Collective* c : ringbench::collectives()) {
    EXPECT_TRUE(c->native || c->nccl) << c->name;
    EXPECT_EQ(ringbench::backend_lacks(*nccl, *c), "") << c->name;
  }
}

TEST(NcclCollectives, OneRankExact) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  run_nccl_ranks(1, check_collectives);
}

TEST(NcclCollectives, TwoRanksExact) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  if (device_count() < 2) GTEST_SKIP() << "NCCL needs one GPU per rank: " << device_count() << " here";
  run_nccl_ranks(2, check_collectives);
}

TEST(Nccl, OneRankExact) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  run_nccl_ranks(1, check_exact);
}

TEST(Nccl, TwoRanksExact) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  if (device_count() < 2) GTEST_SKIP() << "NCCL needs one GPU per rank: " << device_count() << " here";
  run_nccl_ranks(2, check_exact);
}

// Rank 1 never comes: rank 0's setup ends with a TimeoutError at its deadline, not a hang.
TEST(Nccl, MissingRankIsATimeout) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  ringbench::InProcStore store;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    ringbench::NcclComm comm(store, "test/nccl_id", 0, 2, 3000ms);
    FAIL() << "a communicator of 2 ranks was made with one";
  } catch (const ringbench::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("did not complete within"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  // And a rank waiting for an id that rank 0 never publishes.
  try {
    ringbench::NcclComm comm(store, "test/never_published", 1, 2, 500ms);
    FAIL() << "joined without an id";
  } catch (const ringbench::TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("unique id"), std::string::npos) << e.what();
  }
}

// The trainer's NCCL reducer: two ranks on two GPUs end with the same parameters, as one rank
// on the doubled batch does (tolerance as in cuda_train_test: cuDNN's algorithms and TF32).
TEST(Nccl, TrainerTwoRanksMatchOneRank) {
  if (auto why = ringbench::cuda::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  if (device_count() < 2) GTEST_SKIP() << "NCCL needs one GPU per rank: " << device_count() << " here";
  const m::Graph g = m::build_model("lenet", {});
  m::TrainOptions o;
  o.sgd.lr = 0.02f;
  o.fusion_bytes = 1 << 20;
  const int b = 4, steps = 3;
  std::vector<float> one;
  {
    auto net = m::make_network("cudnn", g, 2 * b);
    m::Trainer t(*net, o, nullptr);
    auto src = m::make_synthetic_source(g.input_dims(), 10, 2 * b, 5, 0);
    for (int s = 0; s < steps; ++s) t.step(*src);
    one = t.host_params();
  }
  std::vector<std::vector<float>> result(2);
  run_nccl_ranks(2, [&](ringbench::NcclComm& comm) {
    auto net = m::make_network("cudnn", g, b);
    m::TrainOptions ro = o;
    ro.rank = comm.rank();
    ro.world = 2;
    m::Trainer t(*net, ro, [&](float* grads, size_t count) { return m::make_nccl_reducer(comm, grads, count); });
    EXPECT_NE(t.reducer().find("NCCL"), std::string::npos) << t.reducer();
    // Rank r's half of the doubled batch: the synthetic source of the whole batch, sliced.
    class Half : public m::BatchSource {
     public:
      Half(const m::Graph& gr, int batch, int rank)
          : src_(m::make_synthetic_source(gr.input_dims(), 10, 2 * batch, 5, 0)), per_(gr.input_dims().numel()),
            b_(batch), rank_(rank), x_(size_t(2 * batch) * size_t(per_)), y_(size_t(2 * batch)) {}
      void next(float* x, int32_t* y) override {
        src_->next(x_.data(), y_.data());
        std::memcpy(x, x_.data() + size_t(rank_ * b_) * size_t(per_), size_t(b_) * size_t(per_) * 4);
        std::memcpy(y, y_.data() + size_t(rank_ * b_), size_t(b_) * 4);
      }
      std::string describe() const override { return "half"; }

     private:
      std::unique_ptr<m::BatchSource> src_;
      int64_t per_;
      int b_, rank_;
      std::vector<float> x_;
      std::vector<int32_t> y_;
    } src(g, b, comm.rank());
    for (int s = 0; s < steps; ++s) t.step(src);
    result[size_t(comm.rank())] = t.host_params();
  });
  EXPECT_EQ(result[0], result[1]) << "the ranks diverged";
  double scale = 0, diff = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    scale = std::max(scale, double(std::fabs(one[i])));
    diff = std::max(diff, double(std::fabs(one[i] - result[0][i])));
  }
  EXPECT_LT(diff / scale, 1e-3);
}
