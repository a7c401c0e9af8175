// Input files read whole (configs, catalogs, what-if files, results): only regular files, and
// only up to a bound, so that /dev/zero, a FIFO or a huge file is a clear error instead of a
// hang or an out-of-memory kill.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace ringbench {

// Bounds for the files ringbench reads whole.
constexpr size_t kMaxConfigBytes = size_t(4) << 20;     // sweep configs, what-if files, vGPU catalogs
// raw.jsonl and the JSON results beside it (a real sweep's raw.jsonl is a few MiB; parsed, a
// file takes several times its size in memory)
constexpr size_t kMaxResultsBytes = size_t(64) << 20;

// The contents of `path`. Throws Error naming `what` ("the sweep config") and the path when it
// cannot be opened, is not a regular file (opened without blocking, so a FIFO does not hang),
// or holds more than `max_bytes`.
std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes);

// What a file of mode `m` is, for an error: "a directory", "a FIFO", "a character device" ...
const char* file_type_name(mode_t m);

// `value` as an error message may quote it: at most `max_chars` characters, control characters
// shown as '?', and "..." where it was cut. Errors never echo a file's contents beyond this.
std::string quote_excerpt(std::string_view value, size_t max_chars = 40);

}  // namespace ringbench
