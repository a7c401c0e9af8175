#include "models/jpeg_source.h"

#include "base/errors.h"

namespace ringbench::models {

JpegBatchSource::JpegBatchSource(std::shared_ptr<const input::ImageSet> set, const input::PipelineOptions& o)
    : set_(set), options_(o), pipeline_(std::move(set), o) {}

std::string JpegBatchSource::describe() const {
  return "jpeg (" + set_->describe() + "; rank " + std::to_string(options_.rank) + " reads " +
         std::to_string(set_->rank_record_count(options_.rank, options_.ranks)) + ", " +
         std::to_string(pipeline_.steps_per_epoch()) + " steps an epoch; random resized crop to " +
         std::to_string(options_.image_size) + ", flip, normalise on " + std::to_string(options_.threads) +
         " threads, " + std::to_string(options_.prefetch) + " batches ahead)";
}

void JpegBatchSource::restore(const std::vector<uint64_t>& cursor) {
  if (cursor.size() != 1 || cursor[0] > (uint64_t(1) << 40))
    throw Error("jpeg data: a cursor of " + std::to_string(cursor.size()) + " numbers is not a step");
  pipeline_.seek(int64_t(cursor[0]));
}

}  // namespace ringbench::models
