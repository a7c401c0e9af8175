// Result files: written atomically, and never in place of something that is not a regular file.
#pragma once

#include <string>

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

}  // namespace ringbench
