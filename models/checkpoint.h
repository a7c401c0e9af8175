// Checkpoints: a trained model's parameters and batch-norm state, saved by `train
// --save-checkpoint` and served by `infer --checkpoint`. Format version 1, all integers and
// floats little-endian:
//   8 bytes   magic "RBCKPT\r\n" (the \r\n catches a text-mode copy)
//   u32       format version (1)
//   u32       header length H (at most kMaxCheckpointHeader), then H bytes of JSON: exactly the
//             keys model, image_size, classes, param_count, state_count, signature
//             (graph_signature(): the tensors' names and shapes)
//   payload   param_count then state_count float32
//   64 bytes  SHA-256 (hex) of everything before it: `head -c -64 F | sha256sum` checks it
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/graph.h"

namespace ringbench::models {

constexpr uint32_t kCheckpointVersion = 1;
// A version-1 header is about 200 bytes; a longer one is refused before it is read.
constexpr uint32_t kMaxCheckpointHeader = 4096;

struct Checkpoint {
  std::string model;
  int image_size = 0, classes = 0;
  uint64_t param_count = 0, state_count = 0;
  std::string signature;  // graph_signature() of the graph the values belong to
  std::vector<float> params, state;
  std::string file_sha256;  // SHA-256 (hex) of the whole file it was read from (`sha256sum F`)

  // The header fields of `g`, without values.
  static Checkpoint describe(const Graph& g);
  // The file's bytes (the format above).
  std::string encode() const;
  // Writes encode() atomically (base/output_file.h: never in place of a non-regular file).
  void save(const std::string& path) const;
};

// SHA-256 (hex) of every parameter tensor's name and shape, in order, and the state's size: two
// graphs whose flat buffers mean the same thing have the same signature.
std::string graph_signature(const Graph& g);

// Decodes `bytes` (read from `path`, named in every error) and checks it holds values for `g`.
// Throws Error for a bad magic, another version, a header too long, not JSON or with another key,
// sizes the file cannot hold, another model or graph (all before the values are allocated), or a
// checksum mismatch (found once the values are read).
Checkpoint decode_checkpoint(const std::string& bytes, const std::string& path, const Graph& g);
// The same from a file, read once and never whole: the header and the file's size are checked
// first, then the payload goes straight into the values while it is hashed. Refuses a path that is
// not a regular file (a FIFO, a device, a directory) without reading it.
Checkpoint load_checkpoint(const std::string& path, const Graph& g);

}  // namespace ringbench::models
