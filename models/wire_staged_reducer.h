// A gradient reducer that averages the fp32 gradient buffer with an allreduce algorithm running
// in `wire`: f32 in place on the gradients; bf16 or f16 (compression) through a staging buffer of
// that type, cast into it before the allreduce and back after. One class for every algorithm
// (our flat ring, the hierarchical one), so the staging and its description are written once.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "collectives/reduce.h"
#include "models/trainer.h"

namespace ringbench::models {

// Algo: anything with run(count, offset) over the buffer it was made on (Allreduce,
// HierarchicalAllreduce).
template <class Algo>
class WireStagedReducer : public GradientReducer {
 public:
  // make(buffer) returns the Algo averaging `count` elements of type `wire` at `buffer`, in place.
  // `what`: the description before the wire ("ring (ours) over tcp").
  template <class Make>
  WireStagedReducer(float* grads, size_t count, DType wire, std::string what, Make make)
      : grads_(grads),
        wire_(wire),
        stage_(wire == DType::f32 ? 0 : count),
        ar_(make(wire == DType::f32 ? static_cast<void*>(grads) : static_cast<void*>(stage_.data()))),
        what_(std::move(what)) {}
  void allreduce_avg(size_t offset, size_t count) override {
    if (wire_ == DType::f32) {
      ar_.run(count, offset);
      return;
    }
    narrow_floats(wire_, stage_.data() + offset, grads_ + offset, count);
    ar_.run(count, offset);
    widen_to_floats(wire_, grads_ + offset, stage_.data() + offset, count);
  }
  std::string describe() const override {
    return what_ + (wire_ == DType::f32 ? "" : std::string(", gradients as ") + dtype_name(wire_) + " on the wire");
  }
  DType wire_dtype() const override { return wire_; }

 private:
  float* grads_;
  DType wire_;
  std::vector<uint16_t> stage_;  // bf16/f16 elements; empty for f32
  Algo ar_;
  std::string what_;
};

}  // namespace ringbench::models
