// What the ranks of `mpirun ringbench sweep` tell each other through the store, and the checks
// every such message passes before anything of it is used: the store's values come over the
// network, so a malformed one is an Error naming its sender, never undefined behaviour.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace ringbench {

// A command from rank 0: which point (an index into each rank's own expansion of the config)
// and the point's store and job id, or that the sweep is done.
struct PointCommand {
  bool done = false;
  size_t index = 0;
  std::string store, job;
};
PointCommand parse_command(const nlohmann::json& cmd, int64_t seq, size_t points);

// A sweep rank's report of its part of a point ({code, timed_out, interrupted, wall_s, log}),
// stored under `key` by rank `sender`.
nlohmann::json point_result(const std::string& raw, const std::string& key, int sender);

// A DNS name or address as mpirun's -H takes it: letters, digits, '.', '-', '_', not starting
// with '-' (it would read as an option), at most 253 characters.
bool valid_host_name(const std::string& h);

}  // namespace ringbench
