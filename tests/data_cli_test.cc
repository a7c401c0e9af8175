// End-to-end tests of `ringbench data` and `train --data jpeg`: a small generated set (made by
// the test, a few dozen images), verified, damaged, and trained on by MobileNet v1 and
// Inception v3 at small sizes; the input pipeline's figures in the JSON and the output.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/run_command.h"

namespace ringbench {
namespace {

using namespace ringbench::testing;  // run_command.h
namespace fs = std::filesystem;
const std::string kBin = RINGBENCH_BIN;

// A set of `images` images, 4 to a shard, 10 classes, made once per name.
std::string make_set(const std::string& name, int images) {
  const std::string dir = temp_path(name);
  fs::remove_all(dir);
  const auto r = run_command(kBin + " data make imagenet-like " + dir + " --images " + std::to_string(images) +
                             " --classes 10 --shard-images 4 --seed 3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("wrote " + dir + ": " + std::to_string(images) + " images in"), std::string::npos) << r.output;
  return dir;
}

void damage(const std::string& file, long from_end) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-from_end, std::ios::end);
  const char c = char(f.get() ^ 0x5a);
  f.seekp(-from_end, std::ios::end);
  f.put(c);
}

TEST(DataCli, MakeVerifyAndADamagedShardNamed) {
  const std::string dir = make_set("data_verify", 8);
  auto r = run_command(kBin + " data verify " + dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("every shard's SHA-256 matches"), std::string::npos) << r.output;
  damage(dir + "/shard-00001.rbs", 50);
  r = run_command(kBin + " data verify " + dir);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("damaged: " + dir + "/shard-00001.rbs: its SHA-256 is not the manifest's"), std::string::npos)
      << r.output;
  r = run_command(kBin + " data make imagenet-like " + dir + " --images 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("exists and is not empty"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

TEST(DataCli, MobileNetTrainsOnJpegsOnTwoRanksAndSaysWhatTheInputCost) {
  const std::string dir = make_set("data_train", 16);
  damage(dir + "/shard-00003.rbs", 20);  // rank 1's: one record's CRC-32 fails
  const std::string json = temp_path("data_train") + ".json";
  const std::string train = kBin + " train --model mobilenet_v1 --image-size 32 --classes 10 --data jpeg --data-dir " +
                            dir + " --batch 4 --steps 3 --warmup 1 --ranks 2 --data-threads 2 --json " + json;
  const auto refused = run_command(train);  // 1 of rank 1's 8 records is more than 1%
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_NE(refused.output.find("rank 1 found 1 of its 8 records bad"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("--allow-damaged-data"), std::string::npos) << refused.output;
  const auto r = run_command(train + " --allow-damaged-data");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("# DAMAGED DATA: trained without 1 records"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("data jpeg (packed, 4 shards, 16 images, 10 classes; rank 0 reads 8, 2 steps an epoch"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("# input pipeline: waited"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("# skipped (rank 1): " + dir + "/shard-00003.rbs record 3: its CRC-32"), std::string::npos)
      << r.output;
  const auto doc = read_json(json);
  const auto& in = doc["input"];
  ASSERT_EQ(in["ranks"].size(), 2u);
  EXPECT_EQ(in["bad_records"], 1);
  EXPECT_EQ(in["config"]["threads"], 2);
  EXPECT_EQ(in["config"]["image_size"], 32);
  EXPECT_EQ(in["config"]["steps_per_epoch"], 2);
  EXPECT_EQ(in["allow_damaged_data"], true);
  for (const auto& rk : in["ranks"]) {
    EXPECT_EQ(rk["stall_s"].size(), 3u);
    EXPECT_GT(rk["images_per_s"].get<double>(), 0);
    EXPECT_GT(rk["pipeline_cpus"].get<double>(), 0);
  }
  fs::remove_all(dir);
  std::remove(json.c_str());
}

TEST(DataCli, InceptionTrainsOnAnImageFolderTree) {
  const std::string set = make_set("data_folder_src", 4);
  // An ImageFolder tree (cat/, dog/): the generated JPEGs, cut out of the shard by hand.
  const std::string tree = temp_path("data_folder");
  fs::remove_all(tree);
  std::ifstream shard(set + "/shard-00000.rbs", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(shard)), {});
  auto u32 = [&](size_t at) { return uint32_t(uint8_t(bytes[at])) | uint32_t(uint8_t(bytes[at + 1])) << 8 |
                                     uint32_t(uint8_t(bytes[at + 2])) << 16 | uint32_t(uint8_t(bytes[at + 3])) << 24; };
  for (int i = 0; i < 4; ++i) {
    const size_t entry = 16 + 24 * size_t(i);
    const std::string cls = tree + (i % 2 ? "/dog" : "/cat");
    fs::create_directories(cls);
    std::ofstream(cls + "/" + std::to_string(i) + ".jpg", std::ios::binary) << bytes.substr(u32(entry), u32(entry + 8));
  }
  const auto r = run_command(kBin + " train --model inception_v3 --image-size 75 --classes 2 --data jpeg --data-dir " +
                             tree + " --batch 2 --epochs 1 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("data jpeg (image folder, 4 images, 2 classes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("0 failed reads or decodes skipped"), std::string::npos) << r.output;
  fs::remove_all(tree);
  fs::remove_all(set);
}

TEST(DataCli, BadJpegOptionsAreClearErrors) {
  const std::string dir = make_set("data_errors", 4);
  auto r = run_command(kBin + " train --model mobilenet_v1 --data jpeg");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--data jpeg needs --data-dir"), std::string::npos) << r.output;
  r = run_command(kBin + " train --model lenet --data jpeg --data-dir " + dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("needs a model taking square RGB images"), std::string::npos) << r.output;
  r = run_command(kBin + " train --model mobilenet_v1 --image-size 32 --classes 5 --data jpeg --data-dir " + dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("has 10 classes, more than mobilenet_v1's 5 outputs"), std::string::npos) << r.output;
  r = run_command(kBin + " train --model mobilenet_v1 --image-size 32 --classes 10 --batch 4 --ranks 2 --data jpeg "
                  "--data-dir " + dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("fewer than a batch of 4"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ringbench
