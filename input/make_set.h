// `ringbench data make imagenet-like`: a generated, deterministic set of JPEGs in shards.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ringbench::input {

struct MakeOptions {
  uint64_t images = 1000;
  uint64_t seed = 1;
  uint32_t classes = 1000;
  uint32_t shard_images = 256;  // records per shard (the last may hold fewer)
  int quality = 95;              // JPEG quality (95: about ImageNet's 110 KB per image with this content)
};

struct MakeSummary {
  uint64_t images = 0, bytes = 0;
  size_t shards = 0;
  int median_width = 0, median_height = 0;
  uint64_t median_bytes = 0;
};

// Writes the set into `dir` (created; an existing one must be empty): its shards, then
// manifest.txt. `progress` is called after each shard with the images written so far.
MakeSummary make_imagenet_like(const std::string& dir, const MakeOptions& o,
                               const std::function<void(uint64_t)>& progress = {});

}  // namespace ringbench::input
