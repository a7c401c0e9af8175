// Facts about this host and build for the `#` metadata and the JSON beside every result.
#pragma once

#include <nlohmann/json.hpp>

#include "runner/output_file.h"  // write_file_atomic, which most writers of metadata use

namespace ringbench {

// hostname, pid, kernel, CPU model, cores, reduce kernel ISA.
nlohmann::json host_info();
// ringbench version and commit, compiler, MPI library, build options.
nlohmann::json build_info();
// The MPI path as the environment selects it (pml and btl, "default" when unset).
nlohmann::json mpi_path_info();

}  // namespace ringbench
