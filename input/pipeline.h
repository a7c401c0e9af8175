// The input pipeline of one rank: its records of an image set (disjoint from every other
// rank's), shuffled each epoch from the seed, decoded and augmented (augment.h) on a pool of
// threads into a bounded ring of batches that next() hands out in order.
//
// Deterministic: image j of step k is record order(epoch)[i] with its crop and flip drawn from
// (seed, epoch, record) alone, whatever thread made it and whenever. A record that cannot be read
// or decoded is skipped, counted and named in totals(); the next record of the epoch's order
// takes its place (the same one on every run). So that a run never trains on a fraction of the
// set unawares, a rank with a shard missing, or with more than kMaxBadFraction of its records
// bad, fails unless allow_damaged says to go on.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "input/image_set.h"

namespace ringbench::input {

// The share of a rank's records that may fail (read or decode) before the pipeline stops.
constexpr double kMaxBadFraction = 0.01;

struct PipelineOptions {
  int batch = 32;
  int image_size = 224;
  int threads = 1;
  int prefetch = 2;  // batches made ahead of the one next() hands out (the ring holds prefetch + 1)
  uint64_t seed = 1;
  int rank = 0, ranks = 1;
  std::chrono::milliseconds timeout{30000};  // next()'s longest wait for a batch
  // Steps per epoch: every rank must take the same number. 0: steps_per_epoch(set, ranks, batch).
  int64_t steps_per_epoch = 0;
  bool allow_damaged = false;  // go on with missing shards and any number of bad records
};

struct PipelineTotals {
  int64_t images = 0;    // decoded into batches (failures not counted)
  int64_t skipped = 0;   // records that failed (each failure counted)
  int64_t bad_records = 0;  // distinct records that failed
  double cpu_s = 0;      // the workers' CPU time on reading, decoding and augmenting
  double stall_s = 0;    // time next() waited for a batch
  std::vector<std::string> skipped_names;  // the first few failures: "<file or record>: <why>"
};

// Steps per epoch every rank can take: the smallest rank's records over the batch. Throws Error
// when a rank has fewer records than a batch (naming the set, ranks and batch).
int64_t steps_per_epoch(const ImageSet& set, int ranks, int batch);

class Augmenter;

class Pipeline {
 public:
  Pipeline(std::shared_ptr<const ImageSet> set, const PipelineOptions& o);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Batch step() into images (batch x 3 x size x size, NCHW) and labels, then the next step.
  // Waits at most the timeout (then Error); rethrows a worker's error other than a bad image.
  void next(float* images, int32_t* labels);
  int64_t step() const { return step_; }
  // The next batch is `step`'s (the workers restart there).
  void seek(int64_t step);
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  const PipelineOptions& options() const { return o_; }
  const ImageSet& set() const { return *set_; }
  PipelineTotals totals() const;
  bool allow_damaged() const { return o_.allow_damaged; }
  // The records, in order, that made batch `step`'s images (for tests): run after its next().
  const std::vector<size_t>& last_records() const { return last_records_; }

 private:
  struct Slot {
    std::vector<float> images;
    std::vector<int32_t> labels;
    std::vector<size_t> records;
    int done = 0;
  };
  void start(int64_t step);
  void stop();
  void work(Augmenter& aug);
  void check_damage(const std::string& latest);  // with mu_ held
  std::shared_ptr<const std::vector<size_t>> order(int64_t epoch);
  void make_image(int64_t step, int j, Augmenter& aug, Slot& slot);

  std::shared_ptr<const ImageSet> set_;
  PipelineOptions o_;
  std::vector<size_t> mine_;  // this rank's records
  std::vector<std::unique_ptr<Augmenter>> augmenters_;  // one per worker, made before they start
  int64_t steps_per_epoch_ = 0;
  size_t image_floats_ = 0;

  mutable std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_;
  std::vector<Slot> slots_;
  int64_t step_ = 0;       // the batch next() hands out
  int64_t next_item_ = 0;  // the next image a worker takes: step * batch + j
  bool stopping_ = false;
  std::exception_ptr error_;
  std::map<int64_t, std::shared_ptr<const std::vector<size_t>>> orders_;
  std::set<size_t> bad_;
  PipelineTotals totals_;
  std::vector<size_t> last_records_;
  std::vector<std::thread> workers_;
};

}  // namespace ringbench::input
