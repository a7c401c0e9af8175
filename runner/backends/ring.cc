#include "runner/backends/ring.h"

#include "base/errors.h"
#include "runner/backends/hierarchical.h"

namespace ringbench {
namespace {

class RingCommunicator : public Communicator {
 public:
  RingCommunicator(std::unique_ptr<Transport> t, std::chrono::milliseconds wait_limit, size_t segment_bytes)
      : transport_(std::move(t)), wait_limit_(wait_limit), segment_bytes_(segment_bytes) {}
  std::map<std::string, std::string> path_info() const override { return transport_->path_info(); }
  std::unique_ptr<AllreducePlan> allreduce(const void* in, void* out, size_t max_count, DType dtype, ReduceOp op,
                                           const AllreduceOptions& ring) override {
    return std::make_unique<InAndOutOfPlacePlan<Allreduce>>(in, out, [&](const void* from, void* to) {
      return Allreduce(*transport_, from, to, max_count, dtype, op, ring);
    });
  }
  std::unique_ptr<CollectivePlan> plan(const Collective& c, const PlanArgs& a) override {
    if (!c.ring) throw Error(c.name + " has no algorithm of ours over a transport");
    return c.ring(*transport_, a);
  }
  std::unique_ptr<models::GradientReducer> gradient_reducer(float* grads, size_t count, DType wire) override {
    AllreduceOptions ao;
    ao.ring.timeout = wait_limit_;
    if (segment_bytes_) ao.ring.segment_bytes = segment_bytes_;
    return models::make_ring_reducer(*transport_, grads, count, ao, wire);
  }
  void set_gradient_segment(size_t bytes) override { segment_bytes_ = bytes; }

 private:
  std::unique_ptr<Transport> transport_;
  std::chrono::milliseconds wait_limit_;
  size_t segment_bytes_;
};

}  // namespace

Backend ring_backend(RingBackendSpec spec) {
  Backend b;
  b.name = spec.name;
  b.order = spec.order;
  b.ring = true;
  b.one_host = spec.one_host;
  b.title = "ring (ours)";
  b.over = spec.name;
  b.help = std::move(spec.help);
  b.unavailable = std::move(spec.unavailable);
  b.options = std::move(spec.options);
  b.connect = std::move(spec.connect);
  b.make = [connect = b.connect, name = b.name](const BackendSetup& s) -> std::unique_ptr<Communicator> {
    if (s.net.hierarchical) return make_hierarchical(s, name, connect);
    return std::make_unique<RingCommunicator>(connect(s), 2 * s.timeout, s.net.gradient_segment_bytes);
  };
  return b;
}

}  // namespace ringbench
