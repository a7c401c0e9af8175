#include "runner/job/metadata.h"

#include <cmath>
#include <cstdlib>

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "base/errors.h"
#include "collectives/reduce.h"
#include "ringbench/config.h"
#include "ringbench/git_commit.h"
#include "runner/job/gpu.h"
#include "runner/job/mpi_util.h"

namespace ringbench {

nlohmann::json host_info() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  utsname u{};
  uname(&u);
  std::string cpu = "unknown";
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  return {{"host", host},
          {"pid", static_cast<int>(getpid())},
          {"kernel", std::string(u.sysname) + " " + u.release},
          {"cpu", cpu},
          {"cores", std::thread::hardware_concurrency()},
          {"reduce_isa", reduce_isa()}};
}

nlohmann::json build_info() {
  return {{"ringbench", RINGBENCH_VERSION},
          {"commit", RINGBENCH_GIT_COMMIT},
          #ifdef __clang__
          {"compiler", std::string("clang ") + __clang_version__},
#else
          {"compiler", std::string("g++ ") + __VERSION__},
#endif
          {"mpi", mpi::library_version()},
          {"have_mpi", RINGBENCH_HAVE_MPI != 0},
          {"have_verbs", RINGBENCH_HAVE_VERBS != 0},
          {"have_cuda", built_with_cuda()},
          {"have_nccl", built_with_nccl()}};
}

std::string command_line_output(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string read_first_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

double physical_memory_gib() {
  return double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE)) / double(1 << 30);
}

std::string out_of_memory_text(const std::string& advice) {
  return "out of memory: an allocation failed (this machine has " + std::to_string(std::lround(physical_memory_gib())) +
         " GiB); " + advice;
}

}  // namespace ringbench
