#include "models/bucket_plan.h"

#include <cstdio>

namespace ringbench::models {

BucketPlan plan_buckets(const Graph& g, size_t first_bucket_bytes, size_t fusion_bytes) {
  BucketPlan plan;
  plan.first_bucket_bytes = first_bucket_bytes;
  plan.fusion_bytes = fusion_bytes;
  bool open = false;
  Bucket b;
  for (int t = int(g.params.size()) - 1; t >= 0; --t) {
    const ParamTensor& p = g.params[size_t(t)];
    if (!open) {
      b = Bucket{p.offset + p.numel, 0, t, t};
      open = true;
    }
    b.first = t;
    b.offset = p.offset;
    b.count += p.numel;
    const size_t cap = plan.buckets.empty() ? first_bucket_bytes : fusion_bytes;
    if (fusion_bytes == 0 || b.count * sizeof(float) >= cap) {
      plan.buckets.push_back(b);
      open = false;
    }
  }
  if (open) plan.buckets.push_back(b);
  return plan;
}

std::string describe(const BucketPlan& p) {
  std::string s = std::to_string(p.buckets.size()) + " bucket" + (p.buckets.size() == 1 ? "" : "s") + ":";
  const size_t shown = 8;
  for (size_t i = 0; i < p.buckets.size() && i < shown; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " %.2f MiB", double(p.buckets[i].count) * 4.0 / (1 << 20));
    s += buf;
    if (i + 1 < p.buckets.size()) s += ",";
  }
  if (p.buckets.size() > shown) s += " ...";
  return s;
}

}  // namespace ringbench::models
