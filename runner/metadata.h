// Facts about this host and build for the `#` metadata and the JSON beside every result.
#pragma once

#include <nlohmann/json.hpp>

namespace ringbench {

// hostname, pid, kernel, CPU model, cores, reduce kernel ISA.
nlohmann::json host_info();
// ringbench version and commit, compiler, MPI library, build options.
nlohmann::json build_info();
// The MPI path as the environment selects it (pml and btl, "default" when unset).
nlohmann::json mpi_path_info();
// Writes `text` to `path` through a temporary file and rename(), so readers never see a
// partial file and a crash leaves the previous version intact.
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace ringbench
