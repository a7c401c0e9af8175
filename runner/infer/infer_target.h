// What an inference scenario measures: something that runs one batch of inference, synchronously.
// A real target wraps a network's forward pass (models/); the scenarios (loadgen.h) know only
// this interface, so they are tested with fakes whose service time is known.
#pragma once

namespace ringbench::infer {

class InferTarget {
 public:
  virtual ~InferTarget() = default;
  // Runs one batch of `batch` samples (1 <= batch <= max_batch()) and returns when it is done.
  virtual void run(int batch) = 0;
  virtual int max_batch() const = 0;
};

}  // namespace ringbench::infer
