// `ringbench doctor`: the preflight checks of runner/job/doctor.h on every rank of a world, the
// report printed by rank 0.
#pragma once

#include <string>

namespace ringbench {

struct DoctorArgs {
  std::string json;         // --json FILE
  std::string config;       // --config: a sweep config whose hash every host must agree on
  std::string iface, addr, secret_file;
  double timeout_s = 30;
};

// Exit code: 0 when no check failed, 1 when one did.
int run_doctor(const DoctorArgs& a);

}  // namespace ringbench
