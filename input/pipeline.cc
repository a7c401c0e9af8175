#include "input/pipeline.h"

#include <time.h>

#include <algorithm>

#include "base/errors.h"
#include "input/augment.h"

namespace ringbench::input {
namespace {

constexpr size_t kNamedSkips = 10;
constexpr const char* kAllowDamaged = "pass --allow-damaged-data to train on what is left";

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

int64_t steps_per_epoch(const ImageSet& set, int ranks, int batch) {
  size_t smallest = set.size();
  for (int r = 0; r < ranks; ++r) smallest = std::min(smallest, set.rank_record_count(r, ranks));
  if (smallest < size_t(batch))
    throw Error("the image set (" + set.describe() + ") gives a rank of " + std::to_string(ranks) + " only " +
                std::to_string(smallest) + " images, fewer than a batch of " + std::to_string(batch) +
                ": use a larger set, more shards (data make --shard-images) or a smaller --batch");
  return int64_t(smallest / size_t(batch));
}

Pipeline::Pipeline(std::shared_ptr<const ImageSet> set, const PipelineOptions& o)
    : set_(std::move(set)), o_(o), mine_(set_->rank_records(o.rank, o.ranks)) {
  if (o_.batch < 1 || o_.image_size < 1 || o_.threads < 1 || o_.prefetch < 0)
    throw Error("input pipeline: batch, image size and threads must be >= 1, prefetch >= 0");
  steps_per_epoch_ = o_.steps_per_epoch > 0 ? o_.steps_per_epoch : input::steps_per_epoch(*set_, o_.ranks, o_.batch);
  if (size_t(steps_per_epoch_) * size_t(o_.batch) > mine_.size())
    throw Error("input pipeline: " + std::to_string(steps_per_epoch_) + " steps of " + std::to_string(o_.batch) +
                " need more than rank " + std::to_string(o_.rank) + "'s " + std::to_string(mine_.size()) + " images");
  if (!o_.allow_damaged) {
    const std::vector<std::string> broken = set_->unreadable_shards(o_.rank, o_.ranks);
    if (!broken.empty())
      throw Error("input pipeline: " + std::to_string(broken.size()) + " of rank " + std::to_string(o_.rank) +
                  "'s shards cannot be read (" + broken.front() + "): repair the set (ringbench data verify) or " +
                  kAllowDamaged);
  }
  for (int t = 0; t < o_.threads; ++t) augmenters_.push_back(std::make_unique<Augmenter>());
  image_floats_ = size_t(3) * size_t(o_.image_size) * size_t(o_.image_size);
  slots_.resize(size_t(o_.prefetch) + 1);
  for (Slot& s : slots_) {
    s.images.resize(image_floats_ * size_t(o_.batch));
    s.labels.resize(size_t(o_.batch));
    s.records.resize(size_t(o_.batch));
  }
  start(0);
}

Pipeline::~Pipeline() { stop(); }

void Pipeline::start(int64_t step) {
  step_ = step;
  next_item_ = step * o_.batch;
  stopping_ = false;
  for (Slot& s : slots_) s.done = 0;
  for (int t = 0; t < o_.threads; ++t) workers_.emplace_back([this, t] { work(*augmenters_[size_t(t)]); });
}

void Pipeline::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void Pipeline::seek(int64_t step) {
  stop();
  std::lock_guard<std::mutex> lock(mu_);
  start(step);
}

std::shared_ptr<const std::vector<size_t>> Pipeline::order(int64_t epoch) {
  // Called with mu_ held.
  auto it = orders_.find(epoch);
  if (it != orders_.end()) return it->second;
  auto o = std::make_shared<std::vector<size_t>>(mine_);
  Rng rng(o_.seed ^ 0x0a11ce5eedull, uint64_t(epoch));
  for (size_t i = o->size(); i > 1; --i) std::swap((*o)[i - 1], (*o)[size_t(rng.next() % i)]);
  if (orders_.size() >= 4) orders_.erase(orders_.begin());
  orders_[epoch] = o;
  return o;
}

void Pipeline::make_image(int64_t step, int j, Augmenter& aug, Slot& slot) {
  const int64_t epoch = step / steps_per_epoch_;
  const size_t first = size_t(step % steps_per_epoch_) * size_t(o_.batch) + size_t(j);
  std::shared_ptr<const std::vector<size_t>> ord;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ord = order(epoch);
  }
  float* out = slot.images.data() + size_t(j) * image_floats_;
  for (size_t t = 0; t < ord->size(); ++t) {  // the record, or the next ones of the order in its place
    const size_t record = (*ord)[(first + t) % ord->size()];
    try {
      Rng rng(o_.seed ^ 0xa7e5ull, (uint64_t(epoch) << 32) ^ uint64_t(record));
      aug.run(set_->read(record), set_->name(record), rng, o_.image_size, out);
      slot.labels[size_t(j)] = int32_t(set_->label(record));
      slot.records[size_t(j)] = record;
      return;
    } catch (const ResourceError&) {
      throw;  // the process's fault, not the record's
    } catch (const Error& e) {
      std::lock_guard<std::mutex> lock(mu_);
      ++totals_.skipped;
      if (bad_.insert(record).second && totals_.skipped_names.size() < kNamedSkips)
        totals_.skipped_names.push_back(e.what());
      totals_.bad_records = int64_t(bad_.size());
      check_damage(e.what());
    }
  }
  throw Error("input pipeline: none of rank " + std::to_string(o_.rank) + "'s " + std::to_string(ord->size()) +
              " images decodes (" + set_->describe() + ")");
}

void Pipeline::check_damage(const std::string& latest) {
  if (o_.allow_damaged || double(bad_.size()) <= kMaxBadFraction * double(mine_.size())) return;
  throw Error("input pipeline: rank " + std::to_string(o_.rank) + " found " + std::to_string(bad_.size()) + " of its " +
              std::to_string(mine_.size()) + " records bad, more than " + std::to_string(int(kMaxBadFraction * 100)) +
              "% (latest: " + latest + "): repair the set (ringbench data verify) or " + kAllowDamaged);
}

void Pipeline::work(Augmenter& aug) {
  const int64_t depth = int64_t(slots_.size());
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // Woken by next() and stop(); the timed wait only re-checks, in case a wake was missed.
    while (!work_cv_.wait_for(lock, std::chrono::seconds(1),
                              [&] { return stopping_ || next_item_ / o_.batch < step_ + depth; })) {
    }
    if (stopping_) return;
    const int64_t item = next_item_++;
    const int64_t step = item / o_.batch;
    const int j = int(item % o_.batch);
    Slot& slot = slots_[size_t(step % depth)];
    lock.unlock();
    const double cpu0 = thread_cpu_seconds();
    std::exception_ptr failed;
    try {
      make_image(step, j, aug, slot);
    } catch (...) {
      failed = std::current_exception();
    }
    const double cpu = thread_cpu_seconds() - cpu0;
    lock.lock();
    totals_.cpu_s += cpu;
    if (failed && !error_) error_ = failed;
    if (!failed) ++totals_.images;
    if (++slot.done == o_.batch) ready_cv_.notify_all();
    if (failed) ready_cv_.notify_all();
  }
}

void Pipeline::next(float* images, int32_t* labels) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  Slot& slot = slots_[size_t(step_ % int64_t(slots_.size()))];
  const bool ready = ready_cv_.wait_until(lock, t0 + o_.timeout, [&] { return error_ || slot.done == o_.batch; });
  totals_.stall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (error_) std::rethrow_exception(error_);
  if (!ready)
    throw TimeoutError(-1, "input pipeline: batch " + std::to_string(step_) + " was not ready within " +
                               std::to_string(o_.timeout.count()) + " ms (" + std::to_string(slot.done) + " of " +
                               std::to_string(o_.batch) + " images; " + std::to_string(o_.threads) + " threads)");
  std::copy(slot.images.begin(), slot.images.end(), images);
  std::copy(slot.labels.begin(), slot.labels.end(), labels);
  last_records_ = slot.records;
  slot.done = 0;
  ++step_;
  lock.unlock();
  work_cv_.notify_all();
}

PipelineTotals Pipeline::totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return totals_;
}

}  // namespace ringbench::input
