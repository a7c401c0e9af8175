// The checkpoint format (models/checkpoint.h): a round trip, and a clear error for another
// version, a damaged or truncated file, another model, a header whose sizes lie or that holds
// another key, and a path that is not a regular file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
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

std::string temp_file(const std::string& name) {
  return ::testing::TempDir() + "rb_checkpoint_" + name + "_" + std::to_string(::getpid());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string load_error(const std::string& path, const Graph& g) {
  try {
    load_checkpoint(path, g);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

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
  EXPECT_EQ(back.file_sha256, auth::sha256_hex(bytes)) << "what `sha256sum F` prints";
  EXPECT_EQ(decode_checkpoint(bytes, "F", g).file_sha256, back.file_sha256);
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
  const size_t payload_start = good.size() - kDigest - 4 * (g.param_count + g.state_count);
  const std::string path = temp_file("flipped");
  for (size_t at : {payload_start, good.size() / 2, good.size() - kDigest - 1, good.size() - 1}) {
    std::string bytes = good;
    bytes[at] = char(bytes[at] ^ 0x10);
    EXPECT_TRUE(has(error_of(bytes, g), "checkpoint F is damaged: checksum mismatch")) << "byte " << at;
    write_file(path, bytes);  // the same, streamed from a file
    EXPECT_TRUE(has(load_error(path, g), "is damaged: checksum mismatch")) << "byte " << at;
  }
  std::filesystem::remove(path);
  // A byte of the header is checked with the header, before the payload is read: "classes"
  // becomes "clqsses".
  std::string bytes = good;
  bytes[20] = char(bytes[20] ^ 0x10);
  EXPECT_TRUE(has(error_of(bytes, g), "bad header: unknown key 'clqsses'")) << error_of(bytes, g);
}

TEST(Checkpoint, ATruncatedFileIsAnError) {
  const Graph g = build_model("lenet");
  const std::string good = filled(g).encode();
  // The sizes are checked before anything is read past the header.
  const std::string short_by_1000 = good.substr(0, good.size() - 1000);
  EXPECT_TRUE(has(error_of(short_by_1000, g), "parameters and 0 state values, but the payload has")) << error_of(short_by_1000, g);
  const std::string path = temp_file("truncated");
  write_file(path, short_by_1000);
  EXPECT_TRUE(has(load_error(path, g), "but the payload has " + std::to_string(4 * g.param_count - 1000) + " bytes"));
  std::filesystem::remove(path);
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
  EXPECT_TRUE(has(error_of(with_header(good, h.dump()), g), "bad header: 'param_count' is '-5'"));
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
  const std::string dir = temp_file("dir");
  std::filesystem::create_directories(dir);
  EXPECT_EQ(load_error(dir, g), "checkpoint " + dir + " is a directory, not a regular file");
  EXPECT_THROW(filled(g).save(dir), Error);  // never replaces a directory
  std::filesystem::remove(dir);
}

// A FIFO would block the reader (no writer) and a device never ends: both are refused from their
// type, never read. Were the FIFO opened to be read, this test would hang.
TEST(Checkpoint, AFifoOrADeviceIsRefusedWithoutReading) {
  const Graph g = build_model("lenet");
  const std::string fifo = temp_file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  EXPECT_EQ(load_error(fifo, g), "checkpoint " + fifo + " is a FIFO, not a regular file");
  std::filesystem::remove(fifo);
  EXPECT_EQ(load_error("/dev/zero", g), "checkpoint /dev/zero is a character device, not a regular file");
}

// The header and the file's size are checked before the payload is read or anything allocated:
// a 20 GiB sparse file (nothing on disk) with a lenet header is refused at once, naming the sizes.
TEST(Checkpoint, AFileLargerThanItsHeaderSaysIsRefusedUnread) {
  const Graph g = build_model("lenet");
  const std::string good = filled(g).encode();
  const size_t header_end = kFixed + header_of(good).dump().size();
  const std::string path = temp_file("sparse");
  write_file(path, good.substr(0, header_end));
  const uint64_t size = uint64_t(20) << 30;
  if (::truncate(path.c_str(), off_t(size)) != 0) {
    std::filesystem::remove(path);
    GTEST_SKIP() << "no sparse 20 GiB file here: " << std::strerror(errno);
  }
  const std::string msg = load_error(path, g);
  std::filesystem::remove(path);
  EXPECT_EQ(msg, "checkpoint " + path + ": header says " + std::to_string(g.param_count) +
                     " parameters and 0 state values, but the payload has " +
                     std::to_string(size - header_end - kDigest) + " bytes");
}

TEST(Checkpoint, AnUnknownHeaderKeyIsRefusedNamingIt) {
  const Graph g = build_model("lenet");
  const std::string good = filled(g).encode();
  nlohmann::json h = header_of(good);
  h["comment"] = "hello";
  EXPECT_EQ(error_of(with_header(good, h.dump()), g), "checkpoint F: bad header: unknown key 'comment'");
  // A long key is quoted in part, control characters as '?'.
  h = header_of(good);
  h["\x1b[31m" + std::string(2000, 'k')] = 1;
  const std::string msg = error_of(with_header(good, h.dump()), g);
  EXPECT_TRUE(has(msg, "bad header: unknown key '?[31mkkkk")) << msg;
  EXPECT_LT(msg.size(), 120u) << msg;
  // A header past the bound (a 50 MiB key) is refused before it is read or parsed.
  h = header_of(good);
  h[std::string(50 << 20, 'k')] = 1;
  const std::string huge = with_header(good, h.dump());
  EXPECT_EQ(error_of(huge, g), "checkpoint F: header of " + std::to_string(h.dump().size()) +
                                   " bytes; a version-1 header is at most 4096");
}

// Fields echoed in errors are plain: a model's name, 64 hex digits.
TEST(Checkpoint, ModelAndSignatureMustBePlain) {
  const Graph g = build_model("lenet");
  const std::string good = filled(g).encode();
  nlohmann::json h = header_of(good);
  h["model"] = "lenet\x1b[2J";
  EXPECT_EQ(error_of(with_header(good, h.dump()), g), "checkpoint F: bad header: 'model' is 'lenet?[2J', not a model's name");
  h = header_of(good);
  h["signature"] = "abc";
  EXPECT_EQ(error_of(with_header(good, h.dump()), g), "checkpoint F: bad header: 'signature' is 'abc', not 64 hex digits");
}

// The same model, size and counts but other tensors: the error names two different things, each
// count in full and each signature.
TEST(Checkpoint, AnotherSignatureNamesBothShapesDistinctly) {
  const Graph g = build_model("mobilenet_v1", {.classes = 10, .image_size = 32});
  const std::string good = filled(g).encode();
  nlohmann::json h = header_of(good);
  const std::string theirs(64, 'a');
  h["signature"] = theirs;
  std::string msg = error_of(with_header(good, h.dump()), g);
  const size_t holds = msg.find(" holds "), other = msg.find(", not "), why = msg.find(": the tensors");
  ASSERT_TRUE(holds < other && other < why) << msg;
  EXPECT_NE(msg.substr(holds + 7, other - holds - 7), msg.substr(other + 6, why - other - 6)) << msg;
  EXPECT_TRUE(has(msg, "holds mobilenet_v1 at 32 px with 10 classes (" + std::to_string(g.param_count) +
                           " parameters, " + std::to_string(g.state_count) + " state values, tensors of signature " +
                           theirs.substr(0, 16) + ")")) << msg;
  EXPECT_TRUE(has(msg, "not mobilenet_v1 at 32 px with 10 classes (" + std::to_string(g.param_count) +
                           " parameters, " + std::to_string(g.state_count) + " state values, tensors of signature " +
                           graph_signature(g).substr(0, 16) + ")")) << msg;
  EXPECT_TRUE(has(msg, "the tensors' names or shapes differ")) << msg;
  // One value moved from the state to the parameters: the same payload, the same rounded counts.
  h = header_of(good);
  h["param_count"] = g.param_count + 1;
  h["state_count"] = g.state_count - 1;
  msg = error_of(with_header(good, h.dump()), g);
  EXPECT_TRUE(has(msg, "(" + std::to_string(g.param_count + 1) + " parameters, " + std::to_string(g.state_count - 1) +
                           " state values")) << msg;
  EXPECT_TRUE(has(msg, "not mobilenet_v1 at 32 px with 10 classes (" + std::to_string(g.param_count) + " parameters"))
      << msg;
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
