// Where training batches come from: synthetic images (one fixed random batch, as the
// synthetic benchmarks of Horovod and tf_cnn_benchmarks use) or a real idx dataset
// (Fashion-MNIST), of which each rank loads and reads only its own shard.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/graph.h"

namespace ringbench::models {

// Images as float NCHW, normalised to zero mean and unit variance over the dataset's pixels
// (the statistics of the whole file, so every shard uses the same ones).
struct Dataset {
  Dims dims;
  int classes = 0;
  std::vector<float> images;     // size() * dims.numel()
  std::vector<int32_t> labels;   // in [0, classes)
  size_t size() const { return labels.size(); }
};

// Reads an idx3 image file and an idx1 label file (plain, or gzip-compressed when the name ends
// in .gz; "name" also finds "name.gz"). Keeps samples i with i % shards == shard. Throws
// Error naming the file for a missing file, a bad magic number, truncated data,
// or image and label counts that differ.
Dataset load_idx(const std::string& images, const std::string& labels, int shard = 0,
                 int shards = 1);

// Fashion-MNIST from `dir` (Debian's dataset-fashion-mnist installs it in
// /usr/share/datasets/fashion-mnist): train-* or t10k-* files. The error for a missing
// directory says which package provides it.
extern const char* const kFashionMnistDir;
Dataset load_fashion_mnist(const std::string& dir, bool train, int shard = 0, int shards = 1);

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Fills batch x dims images (NCHW) and batch labels.
  virtual void next(float* images, int32_t* labels) = 0;
  virtual std::string describe() const = 0;
  // Nonzero, and unique to this source, when next() returns the same batch every time
  // (synthetic data): the trainer then copies it to the network once, as synthetic benchmarks
  // keep their batch on the device. 0: a new batch every call.
  virtual uint64_t fixed_batch_id() const { return 0; }
  // Where the source is (a migrated rank goes on from there): opaque numbers, empty when the
  // source has no position (synthetic data); restore() takes what cursor() returned.
  virtual std::vector<uint64_t> cursor() const { return {}; }
  virtual void restore(const std::vector<uint64_t>& cursor);
};

// One batch of uniform random images and labels from (seed, rank), returned at every step.
std::unique_ptr<BatchSource> make_synthetic_source(Dims dims, int classes, int batch,
                                                   uint64_t seed, int rank);
// Batches of `batch` samples from a (sharded) dataset, reshuffled every epoch from
// (seed, epoch); the last partial batch of an epoch is dropped.
std::unique_ptr<BatchSource> make_dataset_source(const Dataset& d, int batch, uint64_t seed);

}  // namespace ringbench::models
