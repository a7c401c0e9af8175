// Sizes on the command line and in configs: "4K" -> 4096, "1M" -> 1048576, "2G", plain bytes;
// binary units as in nccl-tests.
#pragma once

#include <cstddef>
#include <string>

namespace ringbench {

// Throws Error naming the text when it is not a size between 0 and 1P.
size_t parse_bytes(const std::string& s);

}  // namespace ringbench
