// The memory pre-check's count (review C4): what each collective's descriptor says our algorithm
// allocates beside the input and output (Collective::scratch_bytes, both plans together) is what
// its plans really register with the transport: every buffer they register outside the caller's
// input and output, out of place and in place, at N = 1, 2, 4 and 5 and every allreduce --algo.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/errors.h"
#include "runner/backends/collective.h"

namespace ringbench {
namespace {

// Rank 0 of `n` ranks that only counts registrations: the plans are set up, never run.
class CountingTransport : public Transport {
 public:
  CountingTransport(int n, const char* in, const char* out, size_t bytes) : n_(n), in_(in), out_(out), bytes_(bytes) {}
  int rank() const override { return 0; }
  int size() const override { return n_; }
  const TransportCaps& caps() const override { return caps_; }
  std::map<std::string, std::string> path_info() const override { return {}; }
  std::unique_ptr<Buffer> register_buffer(void* data, size_t bytes, MemKind kind) override {
    const char* p = static_cast<const char*>(data);
    const bool callers = (p >= in_ && p < in_ + bytes_) || (p >= out_ && p < out_ + bytes_);
    if (!callers) scratch += bytes;
    return std::make_unique<Buffer>(data, bytes, kind);
  }
  std::unique_ptr<Request> isend(int, const Buffer&, size_t, size_t, uint64_t) override { throw Error("not run"); }
  std::unique_ptr<Request> irecv(int, Buffer&, size_t, size_t, uint64_t) override { throw Error("not run"); }
  std::unique_ptr<Request> irecv_sink(int, size_t, uint64_t, RecvSink) override { throw Error("not run"); }
  Forward irecv_forward(int, int, size_t, uint64_t, Buffer&, size_t, ForwardFn) override { throw Error("not run"); }
  void abort(const std::string&) noexcept override {}
  size_t scratch = 0;  // bytes registered outside the caller's buffers

 private:
  int n_;
  const char *in_, *out_;
  size_t bytes_;
  TransportCaps caps_{};
};

// The scratch our plans of `c` register for `count` floats over `n` ranks (allreduce: the ring
// backend's two Allreduce plans, as runner/backends/ring.cc makes them).
size_t registered_scratch(const Collective& c, int n, size_t count, const AllreduceOptions& o) {
  std::vector<float> in(std::max<size_t>(count, 1)), out(in.size());  // distinct even at count 0
  CountingTransport t(n, reinterpret_cast<const char*>(in.data()), reinterpret_cast<const char*>(out.data()),
                      in.size() * sizeof(float));
  const PlanArgs args{in.data(), out.data(), count, DType::f32, ReduceOp::sum, o};
  if (c.ring) {
    auto plan = c.ring(t, args);
  } else {
    InAndOutOfPlacePlan<Allreduce> plan(in.data(), out.data(), [&](const void* from, void* to) {
      return Allreduce(t, from, to, count, DType::f32, ReduceOp::sum, o);
    });
  }
  return t.scratch;
}

size_t counted(const Collective& c, int n, size_t count, const AllreduceOptions& o) {
  return c.scratch_bytes ? c.scratch_bytes(count, sizeof(float), n, o) : 0;
}

TEST(CollectiveMemory, TheCountIsWhatThePlansRegister) {
  AllreduceOptions o;
  o.ring.segment_bytes = 64 << 10;
  o.direct_max_bytes = 32 << 10;
  for (const Collective* c : collectives())
    for (int n : {1, 2, 4, 5})
      for (size_t count : {size_t(0), size_t(1000), size_t(1) << 18}) {
        const size_t rounded = c->round_count(count, n);
        EXPECT_EQ(counted(*c, n, rounded, o), registered_scratch(*c, n, rounded, o))
            << c->name << " N=" << n << " count " << rounded;
      }
}

TEST(CollectiveMemory, EveryAllreduceAlgorithmIsCounted) {
  const Collective& allreduce = find_collective("allreduce");
  const size_t count = size_t(1) << 18;  // 1 MiB of floats
  for (const char* algo : {"auto", "ring", "direct", "rd", "hd"})
    for (int n : {2, 4, 5}) {
      if (std::string(algo) == "rd" && n == 5) continue;  // rd needs a power of two (an error)
      AllreduceOptions o;
      o.algo = parse_algo(algo);
      EXPECT_EQ(counted(allreduce, n, count, o), registered_scratch(allreduce, n, count, o)) << algo << " N=" << n;
    }
  // A cost table (--algo-table) sets up every algorithm it names, each up to its range's end.
  AllreduceOptions table;
  table.table = {{64 << 10, AllreduceAlgo::direct}, {256 << 10, AllreduceAlgo::hd}, {SIZE_MAX, AllreduceAlgo::ring}};
  for (int n : {2, 4, 5})
    EXPECT_EQ(counted(allreduce, n, count, table), registered_scratch(allreduce, n, count, table)) << "table N=" << n;
  // The one-shot direct algorithm keeps every rank's input, in both plans: 2N copies.
  AllreduceOptions direct;
  direct.algo = AllreduceAlgo::direct;
  EXPECT_EQ(counted(allreduce, 4, count, direct), 2 * 4 * count * sizeof(float));
}

}  // namespace
}  // namespace ringbench
