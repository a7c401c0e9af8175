// A sweep's results directory: created exclusively (never shared by two sweeps started in the
// same second) and locked for the whole sweep or resume, so two processes never write one
// raw.jsonl.
#pragma once

#include <string>

namespace ringbench {

// Creates the directory `base` (its parents too). With `unique`, a name that is taken becomes
// `base-2`, `base-3`, ...; without, an existing empty directory is accepted and a non-empty
// one is an Error. Returns the directory created or accepted.
std::string create_run_dir(const std::string& base, bool unique);

// flock(LOCK_EX) on DIR/.lock, held until destruction (which removes the file); the file
// records the holder's pid.
// Throws Error "DIR is in use by pid N" at once when another process holds it.
class RunDirLock {
 public:
  explicit RunDirLock(const std::string& dir);
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  void lock_once(const std::string& dir);
  std::string path_;
  int fd_ = -1;
};

}  // namespace ringbench
