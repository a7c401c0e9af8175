// Result files: written atomically, and never in place of something that is not a regular file.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace ringbench {

// Checks, before any work is done, that `path` can take a result: its directory exists and is
// writable, and `path` is absent, a regular file, or a symlink to one. Throws Error naming
// `what` (the option, e.g. "--json") and the path otherwise.
void check_output_path(const std::string& path, const std::string& what);

// Writes `text` to `path` through a temporary file in the same directory and rename(), so
// readers never see a partial file and a crash leaves the previous version intact. A symlink is
// written through (its target is replaced, the link stays); anything that is not a regular file
// (a device, a FIFO, a directory, a dangling link) is refused. Every failure says what the OS
// said, and leaves no temporary file behind.
void write_file_atomic(const std::string& path, const std::string& text);

// A result file too large to hold in memory, written piece by piece with write_file_atomic's
// guarantees: into a temporary file beside `path` (checked and made at construction), renamed
// over `path` only by commit(); destroyed uncommitted, the temporary file is removed. Every
// failure throws Error as write_file_atomic's do.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends `bytes`.
  void write(std::string_view bytes);
  // Overwrites bytes already written, from `offset` (e.g. a header reserved first).
  void write_at(uint64_t offset, std::string_view bytes);
  // Reads what was written, from the start, in chunks of at most 1 MiB (e.g. to hash it).
  void read_back(const std::function<void(std::string_view)>& chunk);
  uint64_t size() const { return size_; }
  // fsync, close, rename over the path.
  void commit();

 private:
  [[noreturn]] void fail(const std::string& step, int err);
  std::string path_, target_, tmp_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace ringbench
