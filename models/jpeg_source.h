// Batches from a JPEG image set through the input pipeline (input/pipeline.h): this rank's
// records, decoded and augmented on the pipeline's threads while the trainer computes.
#pragma once

#include <memory>

#include "input/pipeline.h"
#include "models/data.h"

namespace ringbench::models {

class JpegBatchSource : public BatchSource {
 public:
  JpegBatchSource(std::shared_ptr<const input::ImageSet> set, const input::PipelineOptions& o);
  void next(float* images, int32_t* labels) override { pipeline_.next(images, labels); }
  std::string describe() const override;
  // The next step's index: a migrated rank's target goes on from it.
  std::vector<uint64_t> cursor() const override { return {uint64_t(pipeline_.step())}; }
  void restore(const std::vector<uint64_t>& cursor) override;
  const input::Pipeline& pipeline() const { return pipeline_; }

 private:
  std::shared_ptr<const input::ImageSet> set_;
  input::PipelineOptions options_;
  input::Pipeline pipeline_;
};

}  // namespace ringbench::models
