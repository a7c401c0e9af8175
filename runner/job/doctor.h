// The preflight check of a cluster, run by hand (`ringbench doctor`, cli/doctor_cmd.h) or first
// by every sweep under mpirun. Every rank reports its host (build, config hash, MPI library,
// RDMA ports with their GID tables, GPU and vGPU, free and lockable memory, the interface and
// MTU it talks on); rank 0 measures each host's clock offset, and every pair of hosts exchanges
// one message over verbs RC queue pairs. Rank 0 prints one table per host and a verdict per check.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "runner/job/world.h"

namespace ringbench {

// Every rank of `world` must call it. Returns the report on rank 0 and null elsewhere.
// `config_sha256` is "" when there is no config to compare.
nlohmann::json doctor_checks(World& world, const std::string& config_sha256, std::chrono::milliseconds timeout);
// Rank 0's printout of a report: one table per host, then one verdict line per check.
std::string doctor_text(const nlohmann::json& report);
// The verdicts of a report of checked host records ({hosts, clock, verbs_ping}): one
// {check, status (ok, warn, n/a, FAIL), text} per check. doctor_checks() adds them itself.
nlohmann::json doctor_verdicts(const nlohmann::json& report);
// True when no verdict of the report is FAIL.
bool doctor_ok(const nlohmann::json& report);

}  // namespace ringbench
