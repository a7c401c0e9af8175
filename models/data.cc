#include "models/data.h"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "base/errors.h"

namespace ringbench::models {

const char* const kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension

[[noreturn]] void fail(const std::string& file, const std::string& why) {
  throw Error(file + ": " + why);
}

// "name" itself, else "name.gz".
std::string resolve(const std::string& name) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(name, ec)) return name;
  if (std::filesystem::is_regular_file(name + ".gz", ec)) return name + ".gz";
  fail(name, "no such file (nor " + name + ".gz)");
}

// gzread reads plain files too, so one reader serves both.
class Reader {
 public:
  explicit Reader(const std::string& name) : path_(resolve(name)), f_(gzopen(path_.c_str(), "rb")) {
    if (!f_) fail(path_, std::string("cannot open: ") + std::strerror(errno));
  }
  ~Reader() { gzclose(f_); }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  const std::string& path() const { return path_; }

  void read(unsigned char* dst, size_t n, const char* what) {
    while (n > 0) {
      const unsigned chunk = unsigned(std::min<size_t>(n, 1u << 30));
      const int got = gzread(f_, dst, chunk);
      if (got < 0) {
        int err = 0;
        fail(path_, std::string("read error in the ") + what + ": " + gzerror(f_, &err));
      }
      if (got == 0) fail(path_, std::string("truncated: the file ends inside the ") + what);
      dst += got;
      n -= size_t(got);
    }
  }
  uint32_t be32(const char* what) {
    unsigned char b[4];
    read(b, 4, what);
    return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | uint32_t(b[3]);
  }
  void magic(uint32_t expected) {
    const uint32_t m = be32("header");
    if (m != expected) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "bad magic number 0x%08x, expected 0x%08x (idx%d ubyte)", m,
                    expected, expected == kImagesMagic ? 3 : 1);
      fail(path_, buf);
    }
  }

 private:
  std::string path_;
  gzFile f_;
};

void check_shard(int shard, int shards) {
  if (shards < 1 || shard < 0 || shard >= shards)
    throw std::invalid_argument("shard " + std::to_string(shard) + " of " + std::to_string(shards) +
                                ": need shards >= 1 and 0 <= shard < shards");
}

// classes == 0: max label + 1.
Dataset load(const std::string& images, const std::string& labels, int shard, int shards, int classes) {
  check_shard(shard, shards);
  Reader li(labels);
  li.magic(kLabelsMagic);
  const uint32_t nl = li.be32("header");
  Reader im(images);
  im.magic(kImagesMagic);
  const uint32_t n = im.be32("header");
  const uint32_t rows = im.be32("header"), cols = im.be32("header");
  if (n != nl)
    throw Error(im.path() + " has " + std::to_string(n) + " images but " + li.path() +
                             " has " + std::to_string(nl) + " labels");
  if (rows < 1 || cols < 1 || rows > 65536 || cols > 65536 || uint64_t(rows) * cols > (1u << 26))
    fail(im.path(), "implausible image size " + std::to_string(rows) + "x" + std::to_string(cols));

  std::vector<unsigned char> all_labels(n);
  li.read(all_labels.data(), n, "labels");
  const int max_label = n ? *std::max_element(all_labels.begin(), all_labels.end()) : -1;
  if (classes == 0) classes = max_label + 1;
  if (max_label >= classes) {
    const auto at = std::find(all_labels.begin(), all_labels.end(), max_label) - all_labels.begin();
    fail(li.path(), "label " + std::to_string(max_label) + " (sample " + std::to_string(at) + ") >= " +
                        std::to_string(classes) + " classes");
  }

  Dataset d;
  d.dims = {1, int(rows), int(cols)};
  d.classes = classes;
  const size_t numel = size_t(rows) * cols;
  std::vector<unsigned char> pixels(numel);
  double sum = 0, sumsq = 0;  // over every pixel of the file, so all shards normalise alike
  for (uint32_t i = 0; i < n; ++i) {
    im.read(pixels.data(), numel, "images");
    for (unsigned char p : pixels) {
      sum += p;
      sumsq += double(p) * p;
    }
    if (i % uint32_t(shards) != uint32_t(shard)) continue;
    d.images.insert(d.images.end(), pixels.begin(), pixels.end());
    d.labels.push_back(all_labels[i]);
  }
  const double count = double(n) * double(numel);
  const double mean = count > 0 ? sum / count : 0;
  const double var = count > 0 ? std::max(0.0, sumsq / count - mean * mean) : 0;
  const double inv_std = var > 0 ? 1 / std::sqrt(var) : 1;
  for (float& v : d.images) v = float((double(v) - mean) * inv_std);
  return d;
}

uint64_t mix64(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct SplitMix64 {
  uint64_t state;
  uint64_t operator()() { return mix64(state += 0x9e3779b97f4a7c15ull); }
};

void check_batch(Dims dims, int classes, int batch) {
  if (dims.numel() < 1 || classes < 1 || batch < 1)
    throw std::invalid_argument("batch source needs positive dims (" + to_string(dims) + "), classes (" +
                                std::to_string(classes) + ") and batch (" + std::to_string(batch) + ")");
}

uint64_t next_batch_id() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

class SyntheticSource : public BatchSource {
 public:
  SyntheticSource(Dims dims, int classes, int batch, uint64_t seed, int rank)
      : dims_(dims), classes_(classes), batch_(batch), seed_(seed), rank_(rank) {
    check_batch(dims, classes, batch);
    SplitMix64 rng{mix64(seed) ^ mix64(uint64_t(uint32_t(rank)) + 0x73796e7468ull)};
    images_.resize(size_t(batch) * size_t(dims.numel()));
    for (float& v : images_) v = float(double(rng() >> 11) * 0x1.0p-52 - 1.0);  // [-1, 1)
    labels_.resize(size_t(batch));
    for (int32_t& l : labels_) l = int32_t(rng() % uint64_t(classes));
  }
  void next(float* images, int32_t* labels) override {
    std::copy(images_.begin(), images_.end(), images);
    std::copy(labels_.begin(), labels_.end(), labels);
  }
  uint64_t fixed_batch_id() const override { return id_; }
  std::string describe() const override {
    return "synthetic " + std::to_string(batch_) + " x " + to_string(dims_) + ", " + std::to_string(classes_) +
           " classes, seed " + std::to_string(seed_) + ", rank " + std::to_string(rank_);
  }

 private:
  Dims dims_;
  int classes_, batch_;
  uint64_t seed_;
  int rank_;
  std::vector<float> images_;
  std::vector<int32_t> labels_;
  const uint64_t id_ = next_batch_id();
};

class DatasetSource : public BatchSource {
 public:
  DatasetSource(const Dataset& d, int batch, uint64_t seed) : d_(d), batch_(size_t(batch)), seed_(seed) {
    if (batch > 0 && d.size() < size_t(batch))
      throw Error("dataset shard has " + std::to_string(d.size()) +
                               " samples, fewer than one batch of " + std::to_string(batch) +
                               ": use a smaller batch or fewer ranks");
    check_batch(d.dims, d.classes, batch);
    if (d.images.size() != d.size() * size_t(d.dims.numel()))
      throw std::invalid_argument("dataset has " + std::to_string(d.images.size()) + " floats for " +
                                  std::to_string(d.size()) + " images of " + to_string(d.dims));
    order_.resize(d.size());
    shuffle();
  }
  void next(float* images, int32_t* labels) override {
    if (pos_ + batch_ > order_.size()) {  // drop the partial batch, start the next epoch
      ++epoch_;
      shuffle();
    }
    const size_t numel = size_t(d_.dims.numel());
    for (size_t b = 0; b < batch_; ++b) {
      const size_t i = order_[pos_ + b];
      std::copy_n(d_.images.begin() + std::ptrdiff_t(i * numel), numel, images + b * numel);
      labels[b] = d_.labels[i];
    }
    pos_ += batch_;
  }
  std::vector<uint64_t> cursor() const override { return {epoch_, pos_}; }
  void restore(const std::vector<uint64_t>& c) override {
    if (c.size() != 2 || c[1] > order_.size())
      throw Error("a dataset cursor of " + std::to_string(c.size()) + " numbers, position " +
                  (c.size() == 2 ? std::to_string(c[1]) : "?") + " in a shard of " + std::to_string(order_.size()));
    epoch_ = c[0];
    shuffle();
    pos_ = size_t(c[1]);
  }
  std::string describe() const override {
    return "dataset " + std::to_string(d_.size()) + " x " + to_string(d_.dims) + ", " +
           std::to_string(d_.classes) + " classes, batch " + std::to_string(batch_) + " (" +
           std::to_string(d_.size() / batch_) + " per epoch), seed " + std::to_string(seed_);
  }

 private:
  // Fisher-Yates with mt19937_64's specified output (not std::shuffle, whose draws are
  // implementation-defined), so the order is the same with every standard library.
  void shuffle() {
    std::mt19937_64 rng(mix64(seed_) ^ mix64(epoch_ + 0x65706f6368ull));
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng() % i]);
    pos_ = 0;
  }

  Dataset d_;
  size_t batch_;
  uint64_t seed_;
  uint64_t epoch_ = 0;
  size_t pos_ = 0;
  std::vector<size_t> order_;
};

}  // namespace

void BatchSource::restore(const std::vector<uint64_t>& cursor) {
  if (!cursor.empty()) throw Error(describe() + " has no position to restore");
}

Dataset load_idx(const std::string& images, const std::string& labels, int shard, int shards) {
  return load(images, labels, shard, shards, 0);
}

Dataset load_fashion_mnist(const std::string& dir, bool train, int shard, int shards) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw Error("Fashion-MNIST directory " + dir +
                             " not found: install the Debian package dataset-fashion-mnist "
                             "(apt-get install dataset-fashion-mnist) or point to a directory with "
                             "train-images-idx3-ubyte.gz and friends");
  const std::string prefix = dir + (train ? "/train" : "/t10k");
  return load(prefix + "-images-idx3-ubyte", prefix + "-labels-idx1-ubyte", shard, shards, 10);
}

std::unique_ptr<BatchSource> make_synthetic_source(Dims dims, int classes, int batch, uint64_t seed,
                                                   int rank) {
  return std::make_unique<SyntheticSource>(dims, classes, batch, seed, rank);
}

std::unique_ptr<BatchSource> make_dataset_source(const Dataset& d, int batch, uint64_t seed) {
  return std::make_unique<DatasetSource>(d, batch, seed);
}

}  // namespace ringbench::models
