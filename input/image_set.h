// A set of labelled JPEGs to train on: a packed set (DIR/manifest.txt and its shards, as
// `ringbench data make` writes them) or a user's folder tree with one subfolder per class, as
// torchvision's ImageFolder reads it (classes in name order, *.jpg / *.jpeg files in each).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/errors.h"

namespace ringbench::input {

// The process ran out of a resource (file descriptors) reading a set: not the record's fault, so
// never skipped as damage.
class ResourceError : public Error {
 public:
  using Error::Error;
};

class ImageSet {
 public:
  virtual ~ImageSet() = default;
  virtual size_t size() const = 0;
  virtual uint32_t classes() const = 0;
  // Record i's label as its index says (read() does not check it again).
  virtual uint32_t label(size_t i) const = 0;
  // The records rank `rank` of `n` reads: every rank's are disjoint and together all of them.
  // Packed sets go by whole shards (shard s to rank s % n); folders by record (i % n).
  virtual std::vector<size_t> rank_records(int rank, int n) const = 0;
  // rank_records(rank, n).size(), counted without listing them.
  virtual size_t rank_record_count(int rank, int n) const = 0;
  // "FILE: why" for each of rank `rank`'s shards already known unreadable (missing, of another
  // size than the manifest's); none for a folder tree.
  virtual std::vector<std::string> unreadable_shards(int rank, int n) const = 0;
  // Record i's bytes. Throws Error naming the file (and record) when it cannot be read or its
  // checksum is wrong; a shard whose index is damaged fails every read the same way. Throws
  // ResourceError when the process is out of file descriptors.
  virtual std::string read(size_t i) const = 0;
  // "shard-00003.rbs record 17" or "DIR/class/file.jpg": what an error or a skip names.
  virtual std::string name(size_t i) const = 0;
  // "packed, 64 shards" or "image folder": for the header.
  virtual std::string describe() const = 0;
};

// Opens `dir`: a packed set when DIR/manifest.txt exists, else an image folder tree. Throws
// Error naming the directory (or manifest line) when it is neither, or holds no images. A packed
// set's shards are only stat'ed here (a rank opens just its own, when it reads them, and keeps no
// descriptor); a shard that is missing, of another size than the manifest's or with a bad index
// fails its records' read() with that reason, but a set whose shards are mostly missing or of the
// wrong size is refused, naming the manifest.
std::unique_ptr<ImageSet> open_image_set(const std::string& dir);

// Every shard's SHA-256 against the manifest (reads the whole set): one line per shard that
// differs or cannot be read; empty when all match.
std::vector<std::string> verify_packed_set(const std::string& dir);

}  // namespace ringbench::input
