// Finding programs and running them without a shell, for the tools ringbench drives (ip, tc,
// gnuplot, mpirun): one PATH search and one child runner for all of runner/.
#pragma once

#include <string>
#include <vector>

namespace ringbench {

// The executable's path: the first of `first_dirs` that holds it, else as the shell would find
// it on PATH ("" when it is nowhere).
std::string find_on_path(const std::string& exe, const std::vector<std::string>& first_dirs = {});
bool on_path(const std::string& exe);

struct ProcessOutput {
  int status = -1;  // the exit status; 128 + the signal that killed it; 127 when it did not start
  std::string out, err;
  bool ok() const { return status == 0; }
  // stderr (else stdout) without trailing blanks, or "exit status N" when both are empty.
  std::string message() const;
};

// Runs `path` with `argv` (argv[0] is the name it sees) in `cwd` ("" = here), stdin from
// /dev/null, and collects stdout and stderr. posix_spawn (vfork + exec) keeps the child free of
// anything that is not async-signal-safe, which matters because ringbench has threads.
ProcessOutput run_process(const std::string& path, const std::vector<std::string>& argv,
                          const std::string& cwd = "");

}  // namespace ringbench
