#include "runner/cli/command.h"

#include <cstdio>
#include <iostream>

#include "runner/job/metadata.h"

namespace ringbench {

using json = nlohmann::json;

RankJob start_rank_job(const CommandSpec& spec, const std::vector<std::string>& argv) {
  RankJob job;
  job.launched = launch_ranks_here(spec.ranks, spec.gpu_per_rank, argv, spec.timeout, spec.standby_rank);
  if (job.launched) return job;
  job.name = spec.name;
  job.world = make_command_world({spec.ranks, spec.addr, spec.iface, spec.secret_file, spec.timeout}, spec.need_mpi);
  job.rank = job.world->rank;
  job.n = job.world->size;
  job.store = job.world->store.get();
  job.tag = "[rank " + std::to_string(job.rank) + "] ";
  job.timeout = spec.timeout;
  job.json_path = spec.json;
  return job;
}

void RankJob::check_same_options(const std::string& options, const std::string& what) const {
  ringbench::check_same_options(*store, name + "/shape", options, rank, n, timeout, what);
}

json RankJob::host_record(const json& path, const json& gpu) const {
  json self = host_info();
  self["rank"] = rank;
  self["path"] = path;
  self["gpu"] = gpu;
  return self;
}

json RankJob::exchange_hosts(const json& self, bool every_rank_reads,
                             const std::function<void(const json& host, int r)>& check) const {
  store->set(name + "/meta/" + std::to_string(rank), self.dump());
  json hosts = json::array();
  if (rank != 0 && !every_rank_reads) return hosts;
  for (int r = 0; r < n; ++r) {
    hosts.push_back(get_rank_json(*store, name + "/meta/" + std::to_string(r), r, timeout));
    if (check) check(hosts.back(), r);
  }
  return hosts;
}

json RankJob::common_meta(const std::vector<std::string>& argv, const json& hosts) const {
  return {{"command", argv}, {"launcher", world->launcher}, {"ranks", n},
          {"job_id", world->job_id}, {"build", build_info()}, {"hosts", hosts}};
}

void RankJob::write_json(json doc, const std::string& error) const {
  if (rank != 0 || json_path.empty()) return;
  if (!error.empty()) doc["error"] = error;
  write_file_atomic(json_path, doc.dump(2) + "\n");
}

int RankJob::fail(const std::exception& e, const json& doc, const std::string& message) {
  std::fflush(stdout);
  std::cerr << tag + "ringbench " + name + ": error: " + message + "\n" << std::flush;  // one write per line
  try {
    write_json(doc, e.what());
  } catch (const std::exception& e2) {
    std::cerr << tag + "ringbench " + name + ": the error is not in the JSON either: " + e2.what() + "\n";
  }
  world->mpi = false;  // MPI_Finalize could wait for ranks that died; mpirun ends the job
  return 1;
}

}  // namespace ringbench
