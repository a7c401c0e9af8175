#include "runner/cli/doctor_cmd.h"

#include <iostream>

#include "base/errors.h"
#include "base/output_file.h"
#include "runner/job/doctor.h"
#include "runner/job/world.h"
#include "runner/sweep/sweep_config.h"

namespace ringbench {

using json = nlohmann::json;

int run_doctor(const DoctorArgs& a) {
  if (!(a.timeout_s >= 1)) throw Error("--timeout must be at least 1 second");
  if (writes_results() && !a.json.empty()) check_output_path(a.json, "--json");
  const std::string hash = a.config.empty() ? "" : config_hash(load_sweep_config(a.config));
  WorldOptions wo;
  wo.addr = a.addr;
  wo.iface = a.iface;
  wo.secret_file = a.secret_file;
  wo.timeout = Millis(static_cast<long>(a.timeout_s * 1000));
  auto world = make_command_world(wo, false);
  const json report = doctor_checks(*world, hash, wo.timeout);
  if (world->rank != 0) return 0;
  std::cout << doctor_text(report) << std::flush;
  if (!a.json.empty()) write_file_atomic(a.json, report.dump(2) + "\n");
  return doctor_ok(report) ? 0 : 1;
}

}  // namespace ringbench
