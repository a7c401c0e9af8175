#include "collectives/nccl_comm.h"

#include <cstdlib>
#include <cstring>
#include <thread>

#include "collectives/device_reduce.h"
#include "base/errors.h"

extern char** environ;

namespace ringbench {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
  }
  throw Error("NCCL: unknown dtype");
}

std::string seconds_text(std::chrono::milliseconds t) {
  return std::to_string(t.count() / 1000) + "." + std::to_string(t.count() % 1000 / 100) + " s";
}

// Spin (yielding the core) for the first millisecond of a wait, so that short collectives are
// timed without a sleep's granularity, then sleep in short steps.
void back_off(std::chrono::steady_clock::time_point since) {
  if (std::chrono::steady_clock::now() - since < std::chrono::milliseconds(1))
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9, major * 1000 + ... before.
  if (v >= 10000) return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100);
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 100) + "." + std::to_string(v % 100);
}

NcclComm::NcclComm(Store& store, const std::string& key, int rank, int size,
                   std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), timeout_(timeout) {
  const auto deadline = Clock::now() + timeout;
  RB_CUDA(cudaGetDevice(&device_));
  ncclUniqueId id{};
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
      throw Error(std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(r) + " (" +
                  ncclGetLastError(nullptr) + ")");
    store.set(key, Bytes(id.internal, sizeof id.internal));
  } else {
    Bytes b;
    try {
      b = store.get(key, timeout);
    } catch (const TimeoutError&) {
      throw TimeoutError(0, "NCCL bootstrap: rank 0 did not publish the NCCL unique id (store key " +
                                key + ") within " + seconds_text(timeout) +
                                ": it failed or was not started");
    }
    if (b.size() != sizeof id.internal)
      throw Error("NCCL bootstrap: the unique id under " + key + " has " + std::to_string(b.size()) +
                  " bytes, not " + std::to_string(sizeof id.internal) + " (another NCCL version?)");
    std::memcpy(id.internal, b.data(), sizeof id.internal);
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every wait below is ours, with a deadline
  const ncclResult_t r = ncclCommInitRankConfig(&comm_, size, id, rank, &config);
  const std::string what = "ncclCommInitRankConfig (rank " + std::to_string(rank) + " of " +
                           std::to_string(size) + ", CUDA device " + std::to_string(device_) + ")";
  if (r != ncclSuccess && r != ncclInProgress) fail(what, r);
  wait_ready(what, deadline);
}

NcclComm::~NcclComm() {
  if (!comm_) return;
  if (failed_) {
    abort();
    return;
  }
  // ncclCommFinalize flushes what is in flight; non-blocking, so its end is polled. A peer that
  // is gone can keep it from finishing: then abort.
  const auto deadline = Clock::now() + timeout_;
  bool ok = false;
  ncclResult_t r = ncclCommFinalize(comm_);
  if (r == ncclSuccess || r == ncclInProgress) {
    for (;;) {
      ncclResult_t state = ncclInProgress;
      if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
      if (state == ncclSuccess) {
        ok = true;
        break;
      }
      if (state != ncclInProgress || Clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (ok) {
    ncclCommDestroy(comm_);
    comm_ = nullptr;
  } else {
    abort();
  }
}

void NcclComm::abort() noexcept {
  failed_ = true;
  if (comm_) ncclCommAbort(comm_);  // also stops this communicator's kernels still running
  comm_ = nullptr;
}

void NcclComm::fail(const std::string& what, ncclResult_t r) {
  std::string msg = what + " failed: " + ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm_);  // before the abort frees the communicator
  if (last && *last) msg += std::string(" (") + last + ")";
  if (r == ncclRemoteError) msg += ": a peer failed or went away";
  abort();
  throw IoError(-1, msg);
}

void NcclComm::wait_ready(const std::string& what, Clock::time_point deadline) {
  const auto since = Clock::now();
  for (;;) {
    ncclResult_t state = ncclInProgress;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) fail(what + ": ncclCommGetAsyncError", r);
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) fail(what, state);
    if (Clock::now() > deadline) {
      abort();
      throw TimeoutError(-1, what + " did not complete within " + seconds_text(timeout_) +
                                 ": a rank is missing, dead or stuck (aborted the NCCL communicator)");
    }
    back_off(since);
  }
}

void NcclComm::complete(const std::string& what, const std::function<ncclResult_t()>& enqueue,
                        const std::function<void()>& then, cudaStream_t stream) {
  if (!comm_) throw IoError(-1, "the NCCL communicator failed earlier and was aborted");
  const auto deadline = Clock::now() + timeout_;
  const ncclResult_t r = enqueue();
  if (r != ncclSuccess && r != ncclInProgress) fail(what, r);
  // Non-blocking: nothing else may be queued on the stream before the call is enqueued.
  if (r == ncclInProgress) wait_ready(what + " (enqueueing)", deadline);
  if (then) then();
  done_.record(stream);
  // The collective's kernel waits for the peers: poll its end together with NCCL's own errors.
  const auto since = Clock::now();
  for (;;) {
    const cudaError_t e = cudaEventQuery(done_.get());
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      const std::string msg = what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
      abort();
      throw Error(msg);
    }
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm_, &state);
    if (q != ncclSuccess) fail(what + ": ncclCommGetAsyncError", q);
    if (state != ncclSuccess && state != ncclInProgress) fail(what, state);
    if (Clock::now() > deadline) {
      abort();
      throw TimeoutError(-1, what + " did not finish within " + seconds_text(timeout_) +
                                 ": a rank is dead, stopped or not calling it (aborted the NCCL communicator)");
    }
    back_off(since);
  }
}

void NcclComm::allreduce(const void* in, void* out, size_t count, DType dtype, ReduceOp op,
                         cudaStream_t stream) {
  complete(
      "ncclAllReduce of " + std::to_string(count) + " " + dtype_name(dtype) + " elements (" + op_name(op) + ")",
      [&] { return ncclAllReduce(in, out, count, nccl_type(dtype), ncclSum, comm_, stream); },
      [&] {
        if (op == ReduceOp::avg && size_ > 1) divide_on_device(dtype, out, count, float(size_), stream);
      },
      stream);
}

void NcclComm::allgather(const void* in, void* out, size_t block, DType dtype, cudaStream_t stream) {
  complete("ncclAllGather of " + std::to_string(block) + " " + dtype_name(dtype) + " elements per rank",
           [&] { return ncclAllGather(in, out, block, nccl_type(dtype), comm_, stream); }, {}, stream);
}

void NcclComm::reducescatter(const void* in, void* out, size_t block, DType dtype, ReduceOp op,
                             cudaStream_t stream) {
  complete(
      "ncclReduceScatter of " + std::to_string(block) + " " + dtype_name(dtype) + " elements per rank (" +
          op_name(op) + ")",
      [&] { return ncclReduceScatter(in, out, block, nccl_type(dtype), ncclSum, comm_, stream); },
      [&] {
        if (op == ReduceOp::avg && size_ > 1) divide_on_device(dtype, out, block, float(size_), stream);
      },
      stream);
}

void NcclComm::broadcast(const void* in, void* out, size_t count, DType dtype, int root, cudaStream_t stream) {
  complete("ncclBroadcast of " + std::to_string(count) + " " + dtype_name(dtype) + " elements from rank " +
               std::to_string(root),
           [&] { return ncclBroadcast(in, out, count, nccl_type(dtype), root, comm_, stream); }, {}, stream);
}

void NcclComm::alltoall(const void* in, void* out, size_t block, DType dtype, cudaStream_t stream) {
  const size_t bytes = block * dtype_size(dtype);
  auto exchange = [&] {
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
    for (int p = 0; p < size_ && r == ncclSuccess; ++p) {
      r = ncclSend(static_cast<const char*>(in) + size_t(p) * bytes, block, nccl_type(dtype), p, comm_, stream);
      if (r == ncclSuccess)
        r = ncclRecv(static_cast<char*>(out) + size_t(p) * bytes, block, nccl_type(dtype), p, comm_, stream);
    }
    const ncclResult_t end = ncclGroupEnd();  // the group is closed whatever happened in it
    return r != ncclSuccess ? r : end;
  };
  complete("alltoall (grouped ncclSend/ncclRecv) of " + std::to_string(block) + " " + dtype_name(dtype) +
               " elements per peer",
           exchange, {}, stream);
}

std::map<std::string, std::string> NcclComm::path_info() const {
  std::map<std::string, std::string> p = {{"transport", "nccl"}, {"nccl", nccl_version()},
                                          {"cuda_device", std::to_string(device_)}};
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device_) == cudaSuccess) p["pci_bus_id"] = bus;
  for (char** v = environ; *v; ++v) {  // what steers NCCL's choice of network and path
    const std::string kv = *v;
    if (kv.rfind("NCCL_", 0) == 0) {
      const size_t eq = kv.find('=');
      p[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
    }
  }
  return p;
}

}  // namespace ringbench
