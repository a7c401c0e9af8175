// The idx reader (plain and gzip), sharding, normalisation, its errors, and the batch sources.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/data.h"
#include "tests/run_command.h"

namespace ringbench::models {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

void put_be32(Bytes& b, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<unsigned char>(v >> shift));
}

Bytes idx(uint32_t magic, const std::vector<uint32_t>& dims, const Bytes& data) {
  Bytes b;
  put_be32(b, magic);
  for (uint32_t d : dims) put_be32(b, d);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

void write_file(const std::string& path, const Bytes& b, bool gz) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    ASSERT_EQ(gzwrite(f, b.data(), unsigned(b.size())), int(b.size())) << path;
    ASSERT_EQ(gzclose(f), Z_OK) << path;
  } else {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
    ASSERT_TRUE(out.good()) << path;
  }
}

using testing::error_of;  // run_command.h

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// n images of rows x cols whose pixels encode (sample, position), and labels i % classes.
struct Sample {
  uint32_t n = 10, rows = 2, cols = 3;
  int classes = 4;
  Bytes pixels() const {
    Bytes p;
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t j = 0; j < rows * cols; ++j) p.push_back(static_cast<unsigned char>(i * 7 + j * 3));
    return p;
  }
  Bytes labels() const {
    Bytes l;
    for (uint32_t i = 0; i < n; ++i) l.push_back(static_cast<unsigned char>(i % uint32_t(classes)));
    return l;
  }
  Bytes image_file() const { return idx(0x803, {n, rows, cols}, pixels()); }
  Bytes label_file() const { return idx(0x801, {n}, labels()); }
};

class DataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("ringbench_data_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Writes the sample's image and label files as <stem>-images / <stem>-labels (+ ".gz" if gz).
  std::pair<std::string, std::string> write_sample(const Sample& s, const std::string& stem, bool gz) {
    const std::string ext = gz ? ".gz" : "";
    const std::string im = path(stem + "-images" + ext), lb = path(stem + "-labels" + ext);
    write_file(im, s.image_file(), gz);
    write_file(lb, s.label_file(), gz);
    return {im, lb};
  }

  fs::path dir_;
};

// Expected normalised pixels, with the statistics of the whole file.
std::vector<float> normalised(const Bytes& pixels) {
  double sum = 0, sumsq = 0;
  for (unsigned char p : pixels) sum += p, sumsq += double(p) * p;
  const double mean = sum / double(pixels.size());
  const double sd = std::sqrt(sumsq / double(pixels.size()) - mean * mean);
  std::vector<float> out;
  for (unsigned char p : pixels) out.push_back(float((p - mean) / sd));
  return out;
}

TEST_F(DataTest, PlainRoundTripAndNormalisation) {
  const Sample s;
  const auto [im, lb] = write_sample(s, "plain", false);
  const Dataset d = load_idx(im, lb);
  EXPECT_EQ(d.dims, (Dims{1, 2, 3}));
  EXPECT_EQ(d.classes, 4);
  ASSERT_EQ(d.size(), 10u);
  const Bytes labels = s.labels();
  for (size_t i = 0; i < d.size(); ++i) EXPECT_EQ(d.labels[i], labels[i]);
  const std::vector<float> want = normalised(s.pixels());
  ASSERT_EQ(d.images.size(), want.size());
  double sum = 0, sumsq = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(d.images[i], want[i], 1e-5) << i;
    sum += d.images[i];
    sumsq += double(d.images[i]) * d.images[i];
  }
  EXPECT_NEAR(sum / double(want.size()), 0.0, 1e-5);
  EXPECT_NEAR(sumsq / double(want.size()), 1.0, 1e-5);
}

TEST_F(DataTest, GzipAndNameFindsNameGz) {
  const Sample s;
  const auto [pim, plb] = write_sample(s, "p", false);
  const Dataset plain = load_idx(pim, plb);
  const auto [im, lb] = write_sample(s, "z", true);
  const Dataset gz = load_idx(im, lb);
  const Dataset stem = load_idx(path("z-images"), path("z-labels"));  // only the .gz files exist
  EXPECT_EQ(gz.images, plain.images);
  EXPECT_EQ(gz.labels, plain.labels);
  EXPECT_EQ(stem.images, plain.images);
  EXPECT_EQ(stem.labels, plain.labels);
}

TEST_F(DataTest, ShardsCoverEverySampleOnceWithSharedStatistics) {
  Sample s;
  s.n = 11;
  s.classes = 11;  // labels identify samples
  const auto files = write_sample(s, "s", true);  // not a structured binding: a lambda uses them (clang 14)
  const auto& im = files.first;
  const auto& lb = files.second;
  const Dataset all = load_idx(im, lb);
  const size_t numel = 6;
  for (int shards : {1, 2, 3, 11}) {
    std::multiset<int32_t> seen;
    for (int shard = 0; shard < shards; ++shard) {
      const Dataset d = load_idx(im, lb, shard, shards);
      EXPECT_EQ(d.classes, 11);  // from the whole file, not the shard
      for (size_t k = 0; k < d.size(); ++k) {
        const auto i = size_t(d.labels[k]);
        EXPECT_EQ(int(i % size_t(shards)), shard);
        seen.insert(d.labels[k]);
        for (size_t j = 0; j < numel; ++j) EXPECT_EQ(d.images[k * numel + j], all.images[i * numel + j]);
      }
    }
    EXPECT_EQ(seen.size(), 11u) << shards;
    for (int32_t i = 0; i < 11; ++i) EXPECT_EQ(seen.count(i), 1u) << "sample " << i << ", " << shards << " shards";
  }
  EXPECT_TRUE(contains(error_of<std::invalid_argument>([&] { load_idx(im, lb, 2, 2); }), "shard"));
}

TEST_F(DataTest, MissingFileNamesBothNames) {
  const std::string msg = error_of<std::runtime_error>([&] { load_idx(path("nope-images"), path("nope-labels")); });
  EXPECT_TRUE(contains(msg, path("nope-labels"))) << msg;
  EXPECT_TRUE(contains(msg, ".gz")) << msg;
}

TEST_F(DataTest, BadMagic) {
  const Sample s;
  write_file(path("m-images"), idx(0x801, {s.n}, s.labels()), false);  // a label file as images
  write_file(path("m-labels"), s.label_file(), false);
  const std::string msg = error_of<std::runtime_error>([&] { load_idx(path("m-images"), path("m-labels")); });
  EXPECT_TRUE(contains(msg, path("m-images"))) << msg;
  EXPECT_TRUE(contains(msg, "bad magic number 0x00000801, expected 0x00000803")) << msg;
}

TEST_F(DataTest, Truncated) {
  const Sample s;
  Bytes images = s.image_file();
  ASSERT_FALSE(images.empty());
  images.pop_back();  // (not resize(size - 1): GCC 12 at -O1 warns of a wrapped size)
  write_file(path("t-images.gz"), images, true);
  write_file(path("t-labels"), s.label_file(), false);
  std::string msg = error_of<std::runtime_error>([&] { load_idx(path("t-images"), path("t-labels")); });
  EXPECT_TRUE(contains(msg, path("t-images.gz"))) << msg;
  EXPECT_TRUE(contains(msg, "truncated")) << msg;
  write_file(path("h-labels"), Bytes{0, 0, 8}, false);
  msg = error_of<std::runtime_error>([&] { load_idx(path("t-images"), path("h-labels")); });
  EXPECT_TRUE(contains(msg, path("h-labels"))) << msg;
  EXPECT_TRUE(contains(msg, "truncated")) << msg;
}

TEST_F(DataTest, CountsDiffer) {
  Sample s;
  write_file(path("c-images"), s.image_file(), false);
  s.n = 9;
  write_file(path("c-labels"), s.label_file(), false);
  const std::string msg = error_of<std::runtime_error>([&] { load_idx(path("c-images"), path("c-labels")); });
  EXPECT_TRUE(contains(msg, path("c-images") + " has 10 images")) << msg;
  EXPECT_TRUE(contains(msg, path("c-labels") + " has 9 labels")) << msg;
}

TEST_F(DataTest, FashionMnistLayoutAndLabelRange) {
  Sample s;
  write_file(path("t10k-images-idx3-ubyte.gz"), s.image_file(), true);
  write_file(path("t10k-labels-idx1-ubyte.gz"), s.label_file(), true);
  const Dataset d = load_fashion_mnist(dir_.string(), false);
  EXPECT_EQ(d.classes, 10);  // fixed, though the largest label here is 3
  EXPECT_EQ(d.size(), 10u);
  s.n = 11;
  s.classes = 11;  // sample 10 has label 10
  write_file(path("train-images-idx3-ubyte"), s.image_file(), false);
  write_file(path("train-labels-idx1-ubyte"), s.label_file(), false);
  const std::string msg = error_of<std::runtime_error>([&] { load_fashion_mnist(dir_.string(), true); });
  EXPECT_TRUE(contains(msg, path("train-labels-idx1-ubyte"))) << msg;
  EXPECT_TRUE(contains(msg, "label 10 (sample 10) >= 10 classes")) << msg;
}

TEST_F(DataTest, MissingFashionMnistNamesThePackage) {
  const std::string msg = error_of<std::runtime_error>([&] { load_fashion_mnist(path("absent"), true); });
  EXPECT_TRUE(contains(msg, path("absent"))) << msg;
  EXPECT_TRUE(contains(msg, "dataset-fashion-mnist")) << msg;
}

// n samples of 1x1x2 whose first pixel is the sample's index.
Dataset indexed(size_t n) {
  Dataset d;
  d.dims = {1, 1, 2};
  d.classes = 3;
  for (size_t i = 0; i < n; ++i) {
    d.images.push_back(float(i));
    d.images.push_back(-float(i));
    d.labels.push_back(int32_t(i % 3));
  }
  return d;
}

// The sample indices of `epochs` epochs, one vector per epoch.
std::vector<std::vector<int>> epochs_of(BatchSource& src, size_t per_epoch, int batch, int epochs) {
  std::vector<std::vector<int>> out;
  std::vector<float> images(size_t(batch) * 2);
  std::vector<int32_t> labels(static_cast<size_t>(batch));
  for (int e = 0; e < epochs; ++e) {
    out.emplace_back();
    for (size_t b = 0; b < per_epoch; ++b) {
      src.next(images.data(), labels.data());
      for (size_t k = 0; k < size_t(batch); ++k) {
        const int i = int(images[2 * k]);
        EXPECT_EQ(images[2 * k + 1], -float(i));
        EXPECT_EQ(labels[k], i % 3);
        out.back().push_back(i);
      }
    }
  }
  return out;
}

TEST(DatasetSource, EveryShardSampleOncePerEpochInANewOrder) {
  auto src = make_dataset_source(indexed(12), 4, 42);
  const auto epochs = epochs_of(*src, 3, 4, 4);
  for (const auto& e : epochs) {
    const std::set<int> distinct(e.begin(), e.end());
    EXPECT_EQ(distinct.size(), 12u);
    EXPECT_EQ(*distinct.begin(), 0);
    EXPECT_EQ(*distinct.rbegin(), 11);
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
  auto again = make_dataset_source(indexed(12), 4, 42);
  EXPECT_EQ(epochs_of(*again, 3, 4, 4), epochs);
  auto other = make_dataset_source(indexed(12), 4, 43);
  EXPECT_NE(epochs_of(*other, 3, 4, 4), epochs);
}

TEST(DatasetSource, DropsTheLastPartialBatch) {
  auto src = make_dataset_source(indexed(10), 3, 7);
  EXPECT_TRUE(contains(src->describe(), "3 per epoch")) << src->describe();
  for (const auto& e : epochs_of(*src, 3, 3, 5)) {
    ASSERT_EQ(e.size(), 9u);
    EXPECT_EQ(std::set<int>(e.begin(), e.end()).size(), 9u) << "a sample repeated within an epoch";
  }
}

TEST(DatasetSource, ShardSmallerThanABatch) {
  const std::string msg = error_of<std::runtime_error>([] { make_dataset_source(indexed(5), 8, 1); });
  EXPECT_TRUE(contains(msg, "5 samples, fewer than one batch of 8")) << msg;
}

TEST(SyntheticSource, OneFixedBatchPerSeedAndRank) {
  const Dims dims{3, 4, 5};
  const int batch = 6, classes = 10;
  const size_t n = size_t(batch) * size_t(dims.numel());
  auto batch_of = [&](BatchSource& src) {
    std::vector<float> im(n);
    std::vector<int32_t> lb(static_cast<size_t>(batch));
    src.next(im.data(), lb.data());
    return std::make_pair(im, lb);
  };
  auto a = make_synthetic_source(dims, classes, batch, 1, 0);
  const auto first = batch_of(*a);
  EXPECT_EQ(batch_of(*a), first) << "the same batch every step";
  auto same = make_synthetic_source(dims, classes, batch, 1, 0);
  EXPECT_EQ(batch_of(*same), first);
  auto rank1 = make_synthetic_source(dims, classes, batch, 1, 1);
  EXPECT_NE(batch_of(*rank1).first, first.first);
  auto seed2 = make_synthetic_source(dims, classes, batch, 2, 0);
  EXPECT_NE(batch_of(*seed2).first, first.first);
  double sum = 0;
  for (float v : first.first) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LE(v, 1.0f);
    sum += v;
  }
  EXPECT_NEAR(sum / double(n), 0.0, 0.15);
  std::set<int32_t> labels(first.second.begin(), first.second.end());
  EXPECT_GE(*labels.begin(), 0);
  EXPECT_LT(*labels.rbegin(), classes);
  EXPECT_GT(labels.size(), 1u);
}

TEST(FashionMnist, InstalledCopy) {
  std::error_code ec;
  if (!fs::is_directory(kFashionMnistDir, ec))
    GTEST_SKIP() << kFashionMnistDir << " not found (Debian package dataset-fashion-mnist)";
  const Dataset train = load_fashion_mnist(kFashionMnistDir, true);
  EXPECT_EQ(train.size(), 60000u);
  EXPECT_EQ(train.dims, (Dims{1, 28, 28}));
  EXPECT_EQ(train.classes, 10);
  std::vector<int> per_class(10);
  for (int32_t l : train.labels) ++per_class[size_t(l)];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[size_t(c)], 6000) << "class " << c;
  const Dataset test = load_fashion_mnist(kFashionMnistDir, false, 1, 4);
  EXPECT_EQ(test.size(), 2500u);
  EXPECT_EQ(test.dims, (Dims{1, 28, 28}));
  EXPECT_EQ(test.classes, 10);
  EXPECT_EQ(load_fashion_mnist(kFashionMnistDir, false).size(), 10000u);
}

}  // namespace
}  // namespace ringbench::models
