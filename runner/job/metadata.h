// Facts about this host and build for the `#` metadata and the JSON beside every result.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/output_file.h"  // write_file_atomic, which most writers of metadata use

namespace ringbench {

// hostname, pid, kernel, CPU model, cores, reduce kernel ISA.
nlohmann::json host_info();
// ringbench version and commit, compiler, MPI library, build options.
nlohmann::json build_info();

// A command's output, trailing newlines cut ("" when it fails); for versions in env.json.
std::string command_line_output(const std::string& cmd);
// The first line of a file ("" when it cannot be read).
std::string read_first_line(const std::string& path);
// This machine's physical memory in GiB, for "needs N GiB; this machine has M GiB" errors.
double physical_memory_gib();
// What a failed allocation (std::bad_alloc) says: "out of memory: an allocation failed (this
// machine has N GiB); " + `advice`.
std::string out_of_memory_text(const std::string& advice);

}  // namespace ringbench
