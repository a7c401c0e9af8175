#include "runner/allreduce_impl.h"

namespace ringbench {
namespace {

class RingImpl : public AllreduceImpl {
 public:
  RingImpl(Transport& t, const void* in, void* out, size_t max_count, DType dtype, ReduceOp op,
           const AllreduceOptions& opts)
      : out_of_place_(t, in, out, max_count, dtype, op, opts),
        in_place_(t, out, out, max_count, dtype, op, opts) {}
  const char* run(size_t count, bool inplace, size_t offset) override {
    return (inplace ? in_place_ : out_of_place_).run(count, offset);
  }

 private:
  Allreduce out_of_place_, in_place_;
};

}  // namespace

std::unique_ptr<AllreduceImpl> make_ring_impl(Transport& t, const void* in, void* out,
                                              size_t max_count, DType dtype, ReduceOp op,
                                              const AllreduceOptions& opts) {
  return std::make_unique<RingImpl>(t, in, out, max_count, dtype, op, opts);
}

}  // namespace ringbench
