// Gradient buckets: consecutive parameter tensors in backprop order, fused until a bucket
// reaches its threshold (a small first bucket so communication starts early, then the fusion
// threshold), as Horovod's tensor fusion and PyTorch DDP's buckets do. Tensors are registered in
// forward order, so a bucket is one contiguous (offset, count) range of the flat gradients.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "models/graph.h"

namespace ringbench::models {

struct Bucket {
  size_t offset = 0, count = 0;  // floats in the flat gradient buffer
  int first = 0, last = 0;       // parameter tensors [first, last] (registration order)
};

struct BucketPlan {
  std::vector<Bucket> buckets;  // in the order backprop fills them
  size_t first_bucket_bytes = 0, fusion_bytes = 0;
};

// fusion_bytes 0 disables fusion: one bucket per tensor. A bucket closes once it holds at least
// its threshold (the first bucket first_bucket_bytes, the others fusion_bytes).
BucketPlan plan_buckets(const Graph& g, size_t first_bucket_bytes, size_t fusion_bytes);

std::string describe(const BucketPlan& p);  // "12 buckets: 1.0 MiB, 25.3 MiB, ..."

}  // namespace ringbench::models
