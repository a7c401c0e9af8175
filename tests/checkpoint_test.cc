// The checkpoint format (models/checkpoint.h): a round trip, and a clear error for another
// version, a damaged or truncated file, another model, and a header whose sizes lie.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "base/errors.h"
#include "collectives/auth.h"
#include "models/checkpoint.h"
#include "models/model_buffers.h"
#include "models/network.h"
#include "models/zoo.h"

namespace ringbench::models {
namespace {

constexpr size_t kDigest = 64, kFixed = 16;  // hex SHA-256; magic, version, header length

Checkpoint filled(const Graph& g) {
  Checkpoint c = Checkpoint::describe(g);
  c.params.resize(g.param_count);
  c.state.resize(g.state_count);
  for (size_t i = 0; i < c.params.size(); ++i) c.params[i] = float(i % 1000) * 0.001f - 0.5f;
  for (size_t i = 0; i < c.state.size(); ++i) c.state[i] = float(i % 7) + 0.25f;
  return c;
}

std::string error_of(const std::string& bytes, const Graph& g) {
  try {
    decode_checkpoint(bytes, "F", g);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The bytes with a fresh checksum: a header that lies must be caught by the size checks.
std::string resigned(std::string bytes) {
  bytes.resize(bytes.size() - kDigest);
  return bytes + auth::sha256_hex(bytes);
}

// `bytes` with its header replaced by `header` (length field updated), checksum fixed.
std::string with_header(const std::string& bytes, const std::string& header) {
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= uint32_t(static_cast<unsigned char>(bytes[12 + size_t(i)])) << (8 * i);
  std::string out = bytes.substr(0, 12);
  for (int i = 0; i < 4; ++i) out.push_back(char((header.size() >> (8 * i)) & 0xff));
  return resigned(out + header + bytes.substr(kFixed + len));
}

nlohmann::json header_of(const std::string& bytes) {
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= uint32_t(static_cast<unsigned char>(bytes[12 + size_t(i)])) << (8 * i);
  return nlohmann::json::parse(bytes.substr(kFixed, len));
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Checkpoint, RoundTripThroughAFile) {
  const Graph g = build_model("mobilenet_v1", {.classes = 10, .image_size = 32});
  const Checkpoint c = filled(g);
  ASSERT_GT(g.state_count, 0u);
  const std::string path = ::testing::TempDir() + "rb_checkpoint_" + std::to_string(::getpid());
  c.save(path);
  const std::string bytes = c.encode();
  EXPECT_EQ(std::filesystem::file_size(path), bytes.size());
  EXPECT_EQ(bytes.size(), kFixed + header_of(bytes).dump().size() + 4 * (g.param_count + g.state_count) + kDigest);
  const Checkpoint back = load_checkpoint(path, g);
  std::filesystem::remove(path);
  EXPECT_EQ(back.model, "mobilenet_v1");
  EXPECT_EQ(back.image_size, 32);
  EXPECT_EQ(back.classes, 10);
  EXPECT_EQ(back.signature, graph_signature(g));
  EXPECT_EQ(back.params, c.params);
  EXPECT_EQ(back.state, c.state);
  EXPECT_EQ(bytes.substr(bytes.size() - kDigest), auth::sha256_hex(bytes.substr(0, bytes.size() - kDigest)));
}

TEST(Checkpoint, AnotherVersionSaysWhichItReads) {
  const Graph g = build_model("lenet");
  std::string bytes = filled(g).encode();
  bytes[8] = 2;
  EXPECT_EQ(error_of(bytes, g), "checkpoint F is format version 2; this ringbench reads version 1");
  EXPECT_TRUE(has(error_of(resigned(bytes), g), "format version 2")) << "the version is read before the checksum";
}

TEST(Checkpoint, AFlippedByteIsAChecksumMismatch) {
  const Graph g = build_model("lenet");
  const std::string good = filled(g).encode();
  for (size_t at : {size_t(20), good.size() / 2, good.size() - kDigest - 1, good.size() - 1}) {
    std::string bytes = good;
    bytes[at] = char(bytes[at] ^ 0x10);
    EXPECT_TRUE(has(error_of(bytes, g), "checkpoint F is damaged: checksum mismatch")) << "byte " << at;
  }
}

TEST(Checkpoint, ATruncatedFileIsAnError) {
  const Graph g = build_model("lenet");
  const std::string good = filled(g).encode();
  EXPECT_TRUE(has(error_of(good.substr(0, good.size() - 1000), g), "damaged: checksum mismatch"));
  EXPECT_TRUE(has(error_of(good.substr(0, 30), g), "is truncated: 30 bytes"));
  EXPECT_TRUE(has(error_of(good.substr(0, 4), g), "not a ringbench checkpoint"));
  EXPECT_TRUE(has(error_of("", g), "not a ringbench checkpoint"));
  EXPECT_TRUE(has(error_of("{\"model\": \"lenet\"}", g), "not a ringbench checkpoint"));
}

TEST(Checkpoint, AnotherModelNamesBoth) {
  const Graph lenet = build_model("lenet"), mobilenet = build_model("mobilenet_v1");
  const std::string bytes = filled(mobilenet).encode();
  EXPECT_EQ(error_of(bytes, lenet), "checkpoint F holds mobilenet_v1 (4.2M parameters), not lenet");
  // The same model built another way (5 classes): the tensors' shapes differ.
  const std::string msg = error_of(filled(build_model("lenet", {.classes = 5})).encode(), lenet);
  EXPECT_TRUE(has(msg, "holds lenet at 28 px with 5 classes")) << msg;
  EXPECT_TRUE(has(msg, "not lenet at 28 px with 10 classes")) << msg;
}

TEST(Checkpoint, AHeaderClaimingAHugeSizeIsRefusedBeforeAllocating) {
  const Graph g = build_model("lenet");
  const std::string good = filled(g).encode();
  nlohmann::json h = header_of(good);
  h["param_count"] = uint64_t(1) << 62;
  std::string msg = error_of(with_header(good, h.dump()), g);
  EXPECT_TRUE(has(msg, "header says 4611686018427387904 parameters")) << msg;
  h = header_of(good);
  h["state_count"] = uint64_t(-1);
  msg = error_of(with_header(good, h.dump()), g);
  EXPECT_TRUE(has(msg, "but the payload has")) << msg;
  // The header's length itself, past the end of the file.
  std::string bytes = good;
  bytes[15] = char(0x7f);
  msg = error_of(resigned(bytes), g);
  EXPECT_TRUE(has(msg, "beyond the file's end")) << msg;
  // Fields of the wrong type, or missing.
  h = header_of(good);
  h["param_count"] = -5;
  EXPECT_TRUE(has(error_of(with_header(good, h.dump()), g), "bad header: 'param_count' is -5"));
  h.erase("param_count");
  EXPECT_TRUE(has(error_of(with_header(good, h.dump()), g), "bad header: no 'param_count'"));
  EXPECT_TRUE(has(error_of(with_header(good, "[1, 2"), g), "bad header: not a JSON object"));
}

TEST(Checkpoint, LoadNamesAMissingFileOrADirectory) {
  const Graph g = build_model("lenet");
  try {
    load_checkpoint("/nonexistent/x.ckpt", g);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "checkpoint /nonexistent/x.ckpt does not exist");
  }
  EXPECT_THROW(load_checkpoint(::testing::TempDir(), g), Error);
  EXPECT_THROW(filled(g).save(::testing::TempDir()), Error);  // never replaces a directory
}

TEST(Checkpoint, ModelBuffersHoldTheGivenValues) {
  const Graph g = build_model("mobilenet_v1", {.classes = 10, .image_size = 32});
  const Checkpoint c = filled(g);
  auto net = make_network("reference", g, 1, {.inference_only = true});
  auto buffers = make_model_buffers(*net, c.params, c.state);
  EXPECT_TRUE(std::equal(c.params.begin(), c.params.end(), buffers->params()));
  EXPECT_TRUE(std::equal(c.state.begin(), c.state.end(), buffers->state()));
  EXPECT_THROW(make_model_buffers(*net, std::vector<float>(3), c.state), Error);
}

}  // namespace
}  // namespace ringbench::models
