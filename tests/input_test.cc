// The input pipeline (input/): the shard format and manifest, generated sets, ImageFolder trees,
// the crop, flip and DCT-scaled decode against simple references, determinism, disjoint ranks,
// and corrupt input skipped and named.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "base/errors.h"
#include "base/output_file.h"
#include "input/augment.h"
#include "input/decode_budget.h"
#include "input/image_set.h"
#include "input/make_set.h"
#include "input/manifest.h"
#include "input/pipeline.h"
#include "input/shard_format.h"
#include "input/synth_image.h"

namespace {

using namespace ringbench;
using namespace ringbench::input;
namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/ringbench-input-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void spit(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// A small set: `images` generated images, `per_shard` to a shard, 10 classes.
MakeSummary small_set(const fs::path& dir, uint64_t images, uint32_t per_shard, uint64_t seed = 7) {
  MakeOptions o;
  o.images = images;
  o.seed = seed;
  o.classes = 10;
  o.shard_images = per_shard;
  return make_imagenet_like(dir.string(), o);
}

uint64_t hash_floats(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    h = (h ^ bits) * 1099511628211ull;
  }
  return h;
}

// Per-batch hashes of `steps` batches from rank `rank` of `ranks`.
std::vector<uint64_t> batch_hashes(const fs::path& dir, int threads, int steps, int rank = 0, int ranks = 1) {
  PipelineOptions o;
  o.batch = 4;
  o.image_size = 32;
  o.threads = threads;
  o.rank = rank;
  o.ranks = ranks;
  Pipeline p(std::shared_ptr<const ImageSet>(open_image_set(dir.string())), o);
  std::vector<float> images(size_t(4) * 3 * 32 * 32);
  std::vector<int32_t> labels(4);
  std::vector<uint64_t> out;
  for (int s = 0; s < steps; ++s) {
    p.next(images.data(), labels.data());
    out.push_back(hash_floats(images) ^ uint64_t(labels[0]) << 7);
  }
  return out;
}

TEST(ShardFormat, IndexRoundTripsAndEveryDamageIsNamed) {
  std::vector<ShardRecord> recs = {{0, 5, 1, 11}, {0, 3, 2, 22}};
  const std::string head = encode_shard_index(recs);
  const uint64_t file_bytes = head.size() + 8;
  const auto back = decode_shard_index(head, file_bytes, 3, "s");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].offset, head.size() + 5);
  EXPECT_EQ(back[1].label, 2u);
  EXPECT_EQ(back[1].crc32, 22u);
  auto fails = [&](std::string h, uint64_t bytes, uint32_t classes, const std::string& says) {
    try {
      decode_shard_index(h, bytes, classes, "shard-x");
      ADD_FAILURE() << "accepted, expected: " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  fails(head, file_bytes, 2, "record 1 has label 2");
  fails(head, file_bytes + 1, 3, "1 bytes after the last record");
  fails(head, file_bytes - 1, 3, "record 1 runs past the end");
  fails("RBSHARD2" + head.substr(8), file_bytes, 3, "not a ringbench shard");
  std::string moved = head;
  moved[16] ^= 1;  // record 0's offset
  fails(moved, file_bytes, 3, "record 0 does not start");
  std::string huge = head;
  huge[11] = char(0x7f);  // the count
  fails(huge, file_bytes, 3, "more than");
  fails(head.substr(0, 30), file_bytes, 3, "ends inside its index");
}

TEST(Manifest, RoundTripsAndBadLinesAreNamed) {
  Manifest m;
  m.classes = 10;
  m.shards.push_back({"shard-00000.rbs", 4, 1000, std::string(64, 'a')});
  const Manifest back = parse_manifest(format_manifest(m), "M");
  EXPECT_EQ(back.classes, 10u);
  ASSERT_EQ(back.shards.size(), 1u);
  EXPECT_EQ(back.shards[0].sha256, m.shards[0].sha256);
  EXPECT_EQ(back.images(), 4u);
  const std::string good = format_manifest(m);
  auto fails = [](const std::string& text, const std::string& says) {
    try {
      parse_manifest(text, "M");
      ADD_FAILURE() << "accepted, expected: " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  fails("hello\n", "not a ringbench image set manifest");
  fails(good + "shard ../etc/passwd 1 1 " + std::string(64, 'a') + "\n", "line 4: shard file '../etc/passwd' is not");
  fails(good + "shard shard-00000.rbs 4 1000 " + std::string(64, 'a') + "\n", "again");
  fails(good + "shard b 0 1 " + std::string(64, 'a') + "\n", "the record count '0'");
  fails(good + "shard b 1 1 XYZ\n", "not a SHA-256");
  fails("ringbench-images 1\nclasses 0\n", "the class count");
  fails("ringbench-images 1\nclasses 3\n", "no shards");
  fails(good + "rm -rf /\n", "line 4");
}

TEST(MakeSet, IsDeterministicAndVerifies) {
  TempDir a, b;
  const MakeSummary s = small_set(a.path / "set", 6, 4);
  small_set(b.path / "set", 6, 4);
  EXPECT_EQ(s.shards, 2u);
  EXPECT_GT(s.median_width, 96);
  EXPECT_GT(s.median_bytes, 20000u);  // photo-like detail, not flat colour
  EXPECT_EQ(slurp(a.path / "set/manifest.txt"), slurp(b.path / "set/manifest.txt"));
  EXPECT_TRUE(verify_packed_set((a.path / "set").string()).empty());
  const auto set = open_image_set((a.path / "set").string());
  EXPECT_EQ(set->size(), 6u);
  EXPECT_EQ(set->classes(), 10u);
  EXPECT_EQ(set->name(5), (a.path / "set/shard-00001.rbs").string() + " record 1");
  // A changed byte: verify names the shard.
  std::string shard = slurp(a.path / "set/shard-00001.rbs");
  shard[shard.size() - 100] ^= 0x55;
  spit(a.path / "set/shard-00001.rbs", shard);
  const auto problems = verify_packed_set((a.path / "set").string());
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("shard-00001.rbs: its SHA-256"), std::string::npos) << problems[0];
  // Into a directory that is not empty: refused.
  EXPECT_THROW(small_set(a.path / "set", 2, 4), Error);
}

// data make streams each shard through one of these (review D4: it held a whole shard, up to a
// million images, in memory): pieces appended and a reserved header filled in afterwards read
// back whole; nothing is at the path before commit, and an uncommitted writer leaves no file.
TEST(MakeSet, AShardIsStreamedToATemporaryFileAndAppearsWholeOnCommit) {
  TempDir t;
  const fs::path path = t.path / "shard.rbs";
  {
    AtomicFileWriter out(path.string());
    out.write(std::string(4, '\0'));
    out.write("body");
    out.write(std::string(3 << 20, 'x'));  // more than read_back's chunk
    out.write_at(0, "HEAD");
    EXPECT_FALSE(fs::exists(path));
    std::string back;
    out.read_back([&](std::string_view c) { back += c; });
    EXPECT_EQ(back.substr(0, 8), "HEADbody");
    EXPECT_EQ(back.size(), out.size());
    EXPECT_EQ(out.size(), 8u + (3u << 20));
    out.commit();
  }
  EXPECT_EQ(slurp(path).substr(0, 8), "HEADbody");
  { AtomicFileWriter dropped((t.path / "dropped").string()); dropped.write("partial"); }
  EXPECT_EQ(std::distance(fs::directory_iterator(t.path), fs::directory_iterator{}), 1);  // the shard alone
}

// Review D5: decodes reserve their memory from one budget, so that many threads meeting huge
// (valid) JPEGs at once wait their turn instead of each taking ~576 MB.
TEST(DecodeBudget, ReservationsPastTheBudgetWaitTheirTurnAndOneAloneAlwaysFits) {
  DecodeBudget budget(100, std::chrono::seconds(30));
  budget.acquire(60);
  std::atomic<bool> second{false};
  std::thread t([&] {
    budget.acquire(60);
    second = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(second);  // 120 > 100: it waits
  budget.release(60);
  t.join();
  EXPECT_TRUE(second);
  EXPECT_EQ(budget.peak(), 60u);
  budget.release(60);
  budget.acquire(1000);  // larger than the budget, but alone: it goes
  EXPECT_EQ(budget.in_use(), 1000u);
  budget.release(1000);
  DecodeBudget tight(100, std::chrono::milliseconds(50));
  tight.acquire(80);
  EXPECT_THROW(tight.acquire(30), ResourceError);  // never damage: the pipeline stops, naming why
  // What a decode reserves: the largest image the decoder takes needs about 576 MB, whole.
  EXPECT_EQ(decode_memory_bytes({8192, 8192}, {1, 1}), uint64_t(8192) * 8192 * 9);
  EXPECT_LT(decode_memory_bytes({8192, 8192}, {1, 8}), uint64_t(8192) * 8192 * 7);
  EXPECT_LE(decode_memory_bytes({8192, 8192}, {1, 1}), kDecodeMemoryBytes);  // one always fits
}

TEST(DecodeBudget, EveryDecodeOfAPipelineHoldsAReservationAndGivesItBack) {
  TempDir t;
  small_set(t.path / "set", 24, 8);
  const uint64_t before = decode_budget().reservations();
  batch_hashes(t.path / "set", 3, 4);
  EXPECT_GE(decode_budget().reservations() - before, 4u * 4u);  // 4 steps of 4 images, at least
  EXPECT_EQ(decode_budget().in_use(), 0u);
}

// The crop resized 1:1 is the crop itself, mirrored when flipped; resized 2:1 it is the mean of
// each 2x2 block (bilinear sampling at the blocks' centres).
TEST(Augment, CropAndFlipMatchASimpleReference) {
  RgbImage img{40, 30, {}};
  for (int y = 0; y < 30; ++y)
    for (int x = 0; x < 40; ++x)
      for (int c = 0; c < 3; ++c) img.pixels.push_back(uint8_t((x * 7 + y * 13 + c * 50) % 256));
  auto value = [&](int x, int y, int c) { return float(img.pixels[(size_t(y) * 40 + size_t(x)) * 3 + size_t(c)]); };
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  const int size = 8;
  std::vector<float> out(size_t(3) * size * size);
  for (bool flip : {false, true}) {
    crop_resize_normalise(img, {40, 30}, {5, 9, size, size, flip}, size, out.data());
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x) {
          const float want = (value(5 + (flip ? size - 1 - x : x), 9 + y, c) / 255 - mean[c]) / stdev[c];
          EXPECT_NEAR(out[size_t(c) * size * size + size_t(y) * size + size_t(x)], want, 1e-5) << x << "," << y;
        }
    crop_resize_normalise(img, {40, 30}, {4, 2, 2 * size, 2 * size, flip}, size, out.data());
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x) {
          const int sx = 4 + 2 * (flip ? size - 1 - x : x), sy = 2 + 2 * y;
          const float avg = (value(sx, sy, c) + value(sx + 1, sy, c) + value(sx, sy + 1, c) + value(sx + 1, sy + 1, c)) / 4;
          EXPECT_NEAR(out[size_t(c) * size * size + size_t(y) * size + size_t(x)], (avg / 255 - mean[c]) / stdev[c], 1e-4);
        }
  }
}

TEST(Augment, RandomCropsStayInsideAndFollowTorchvisionsRanges) {
  Rng rng(3, 4);
  int flips = 0;
  for (int i = 0; i < 2000; ++i) {
    const Crop c = random_crop(500, 375, rng);
    ASSERT_GE(c.x, 0);
    ASSERT_GE(c.y, 0);
    ASSERT_LE(c.x + c.width, 500);
    ASSERT_LE(c.y + c.height, 375);
    const double area = double(c.width) * c.height / (500.0 * 375);
    EXPECT_GE(area, 0.079);
    const double ratio = double(c.width) / c.height;
    EXPECT_GE(ratio, 0.74);
    EXPECT_LE(ratio, 1.35);
    flips += c.flip;
  }
  EXPECT_GT(flips, 900);
  EXPECT_LT(flips, 1100);
}

// Decoding at a DCT scale, then resizing, gives about the image that decoding whole gives.
TEST(Augment, DctScaledDecodeFollowsTheFullDecode) {
  Jpeg jpeg;
  const RgbImage src = synth_image(5, 1, 3, {480, 360});
  const std::string bytes = jpeg.encode(src, 95);
  const Crop c{40, 30, 400, 300, true};
  const int size = 64;
  const Scale s = decode_scale(c, size);
  EXPECT_LE(s.num * 4, s.denom * 1) << s.num << "/" << s.denom;  // 400 -> 64 allows 1/4 or less
  RgbImage full, small;
  jpeg.decode(bytes, 1, 1, full, "x");
  jpeg.decode(bytes, s.num, s.denom, small, "x");
  EXPECT_EQ(small.width, scaled(480, s));
  std::vector<float> a(size_t(3) * size * size), b(a.size());
  crop_resize_normalise(full, {480, 360}, c, size, a.data());
  crop_resize_normalise(small, {480, 360}, c, size, b.data());
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += std::abs(a[i] - b[i]);
  EXPECT_LT(diff / double(a.size()), 0.25);  // in normalised units (1 ~ 57 grey levels)
}

TEST(Pipeline, BatchesAreTheSameForASeedWhateverTheThreads) {
  TempDir t;
  small_set(t.path / "set", 24, 8);
  const auto one = batch_hashes(t.path / "set", 1, 9);  // 6 steps an epoch: into the second
  EXPECT_EQ(one, batch_hashes(t.path / "set", 3, 9));
  EXPECT_EQ(std::set<uint64_t>(one.begin(), one.end()).size(), one.size());
}

TEST(Pipeline, RanksReadDisjointShardsAndEveryEpochIsAPermutation) {
  TempDir t;
  small_set(t.path / "set", 36, 4);  // 9 shards: 3 per rank
  const auto set = std::shared_ptr<const ImageSet>(open_image_set((t.path / "set").string()));
  EXPECT_EQ(steps_per_epoch(*set, 3, 4), 3);
  std::vector<float> images(size_t(4) * 3 * 16 * 16);
  std::vector<int32_t> labels(4);
  std::vector<std::vector<size_t>> epoch_order[3];
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::set<size_t> seen_this_epoch;
    for (int r = 0; r < 3; ++r) {
      PipelineOptions o;
      o.batch = 4;
      o.image_size = 16;
      o.rank = r;
      o.ranks = 3;
      Pipeline p(set, o);
      p.seek(epoch * 3);
      std::vector<size_t> mine;
      for (int s = 0; s < 3; ++s) {
        p.next(images.data(), labels.data());
        for (size_t i = 0; i < 4; ++i) {
          const size_t rec = p.last_records()[i];
          EXPECT_EQ((rec / 4) % 3, size_t(r)) << "record " << rec << " is in another rank's shard";
          EXPECT_EQ(uint32_t(labels[i]), set->label(rec));
          mine.push_back(rec);
        }
      }
      for (size_t rec : mine) EXPECT_TRUE(seen_this_epoch.insert(rec).second) << "record " << rec << " twice";
      epoch_order[r].push_back(mine);
    }
    EXPECT_EQ(seen_this_epoch.size(), 36u);
  }
  for (int r = 0; r < 3; ++r) EXPECT_NE(epoch_order[r][0], epoch_order[r][1]) << "rank " << r << " did not reshuffle";
}

TEST(Pipeline, CorruptImagesAndDamagedShardsAreSkippedCountedAndNamed) {
  TempDir t;
  const fs::path dir = t.path / "set";
  small_set(dir, 16, 4);
  // Shard 1: one record's bytes changed (its CRC-32 no longer matches). Shard 2: cut short.
  std::string s1 = slurp(dir / "shard-00001.rbs");
  s1[s1.size() - 10] ^= 0x5a;
  spit(dir / "shard-00001.rbs", s1);
  const std::string s2 = slurp(dir / "shard-00002.rbs");
  spit(dir / "shard-00002.rbs", s2.substr(0, s2.size() / 2));
  PipelineOptions o;
  o.batch = 4;
  o.image_size = 16;
  o.threads = 2;
  const auto set = std::shared_ptr<const ImageSet>(open_image_set(dir.string()));
  try {  // a shard of the wrong size: refused unless told to go on
    Pipeline refused(set, o);
    ADD_FAILURE() << "a rank with a broken shard was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shard-00002.rbs: the shard has"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--allow-damaged-data"), std::string::npos) << e.what();
  }
  o.allow_damaged = true;
  Pipeline p(set, o);
  std::vector<float> images(size_t(4) * 3 * 16 * 16);
  std::vector<int32_t> labels(4);
  for (int s = 0; s < 8; ++s) p.next(images.data(), labels.data());  // two epochs
  const PipelineTotals tot = p.totals();
  EXPECT_EQ(tot.bad_records, 5);  // 1 + 4, in both epochs
  EXPECT_GE(tot.skipped, 2 * 5);  // a bad record in place of a bad one counts again
  EXPECT_GE(tot.images, 8 * 4);
  std::string names;
  for (const std::string& n : tot.skipped_names) names += n + "\n";
  EXPECT_NE(names.find("shard-00001.rbs record 3: its CRC-32"), std::string::npos) << names;
  EXPECT_NE(names.find("shard-00002.rbs record"), std::string::npos) << names;
  EXPECT_NE(names.find("the manifest says"), std::string::npos) << names;
}

// D3: one bad record in 16 (more than 1%) stops the pipeline, unless told to go on.
TEST(Pipeline, MoreThanOnePercentBadRecordsIsAnErrorUnlessAllowed) {
  TempDir t;
  const fs::path dir = t.path / "set";
  small_set(dir, 16, 16);
  std::string s0 = slurp(dir / "shard-00000.rbs");
  s0[s0.size() - 10] ^= 0x5a;
  spit(dir / "shard-00000.rbs", s0);
  PipelineOptions o;
  o.batch = 4;
  o.image_size = 16;
  const auto set = std::shared_ptr<const ImageSet>(open_image_set(dir.string()));
  std::vector<float> images(size_t(4) * 3 * 16 * 16);
  std::vector<int32_t> labels(4);
  try {
    Pipeline p(set, o);
    for (int s = 0; s < 4; ++s) p.next(images.data(), labels.data());  // an epoch
    ADD_FAILURE() << "trained on past a bad record in 16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 of its 16 records bad, more than 1% (latest: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--allow-damaged-data"), std::string::npos) << e.what();
  }
  o.allow_damaged = true;
  Pipeline p(set, o);
  for (int s = 0; s < 4; ++s) p.next(images.data(), labels.data());
  EXPECT_EQ(p.totals().bad_records, 1);
}

TEST(ImageFolder, ClassesInNameOrderAndAGarbageFileIsSkipped) {
  TempDir t;
  Jpeg jpeg;
  for (const char* cls : {"zebra", "ant", "cat"})
    for (int i = 0; i < 3; ++i) {
      fs::create_directories(t.path / cls);
      spit(t.path / cls / ("img" + std::to_string(i) + ".JPEG"), jpeg.encode(synth_image(1, uint64_t(i), 0, {64, 48}), 80));
    }
  spit(t.path / "ant/readme.txt", "not an image");
  spit(t.path / "cat/broken.jpg", "\xff\xd8 definitely not a JPEG");
  const auto set = std::shared_ptr<const ImageSet>(open_image_set(t.path.string()));
  EXPECT_EQ(set->classes(), 3u);
  EXPECT_EQ(set->size(), 10u);
  EXPECT_EQ(set->label(0), 0u);  // ant
  EXPECT_EQ(set->label(9), 2u);  // zebra
  EXPECT_EQ(set->name(3), (t.path / "cat/broken.jpg").string());
  PipelineOptions o;
  o.batch = 5;
  o.image_size = 24;
  o.prefetch = 0;
  o.allow_damaged = true;  // 1 bad in 10
  Pipeline p(set, o);
  std::vector<float> images(size_t(5) * 3 * 24 * 24);
  std::vector<int32_t> labels(5);
  p.next(images.data(), labels.data());
  p.next(images.data(), labels.data());
  ASSERT_EQ(p.totals().skipped, 1);
  EXPECT_NE(p.totals().skipped_names[0].find("cat/broken.jpg: not a JPEG"), std::string::npos)
      << p.totals().skipped_names[0];
  TempDir empty;
  EXPECT_THROW(open_image_set(empty.path.string()), Error);
}

// D7: images that failed are not counted as decoded.
TEST(ImageFolder, NothingDecodableIsAnErrorAndNoImageIsCounted) {
  TempDir t;
  fs::create_directories(t.path / "cat");
  for (int i = 0; i < 4; ++i) spit(t.path / "cat" / ("img" + std::to_string(i) + ".jpg"), "\xff\xd8 not a JPEG");
  PipelineOptions o;
  o.batch = 2;
  o.image_size = 16;
  o.threads = 2;
  o.allow_damaged = true;
  Pipeline p(std::shared_ptr<const ImageSet>(open_image_set(t.path.string())), o);
  std::vector<float> images(size_t(2) * 3 * 16 * 16);
  std::vector<int32_t> labels(2);
  try {
    p.next(images.data(), labels.data());
    ADD_FAILURE() << "a batch of undecodable images";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none of rank 0's 4 images decodes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(p.totals().images, 0);
}

TEST(Pipeline, ASetSmallerThanABatchPerRankIsAClearError) {
  TempDir t;
  small_set(t.path / "set", 8, 4);
  const auto set = open_image_set((t.path / "set").string());
  try {
    steps_per_epoch(*set, 4, 4);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than a batch of 4"), std::string::npos) << e.what();
  }
}

}  // namespace

// D1: the manifest alone must not size a rank's allocations: the set's images are capped, and a
// set whose shards are mostly missing is refused, naming the manifest.
TEST(PackedSet, AManifestOfHugeOrMissingShardsIsRefusedNamingIt) {
  TempDir t;
  const std::string hash(64, 'a');
  std::string huge = "ringbench-images 1\nclasses 10\n";
  for (int s = 0; s < 21; ++s) huge += "shard s" + std::to_string(s) + " 1048576 1 " + hash + "\n";
  spit(t.path / "manifest.txt", huge);
  try {
    open_image_set(t.path.string());
    ADD_FAILURE() << "a manifest of 22M images was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("manifest.txt line 23: the shards hold more than"), std::string::npos)
        << e.what();
  }
  small_set(t.path / "set", 16, 4);
  fs::remove(t.path / "set/shard-00001.rbs");
  fs::remove(t.path / "set/shard-00002.rbs");
  const auto half = open_image_set((t.path / "set").string());  // half missing: still opens
  EXPECT_EQ(half->rank_record_count(1, 3), half->rank_records(1, 3).size());
  EXPECT_EQ(half->rank_record_count(0, 3), 8u);
  fs::remove(t.path / "set/shard-00003.rbs");
  try {
    open_image_set((t.path / "set").string());
    ADD_FAILURE() << "a set with 3 of 4 shards missing was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("set/manifest.txt: 3 of its 4 shards are missing"), std::string::npos)
        << e.what();
  }
}

size_t open_fds() { return size_t(std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator())); }

// D2: a rank keeps no shard open (an ImageNet-sized set has more shards than RLIMIT_NOFILE), and
// running out of descriptors is an error of its own, never a damaged record to skip.
TEST(PackedSet, NoShardStaysOpenAndOutOfDescriptorsIsNotDamage) {
  TempDir t;
  small_set(t.path / "set", 16, 2);  // 8 shards
  const size_t before = open_fds();
  const auto set = open_image_set((t.path / "set").string());
  for (size_t i : set->rank_records(1, 2)) EXPECT_FALSE(set->read(i).empty());
  EXPECT_EQ(open_fds(), before);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = before + 16;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> filler;  // every descriptor the limit allows, taken
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) filler.push_back(fd);
  bool resource_error = false;
  try {
    set->read(0);
  } catch (const ResourceError& e) {
    resource_error = std::string(e.what()).find("shard-00000.rbs") != std::string::npos;
  } catch (...) {
  }
  for (int fd : filler) ::close(fd);
  ::setrlimit(RLIMIT_NOFILE, &old);
  EXPECT_TRUE(resource_error);
}
