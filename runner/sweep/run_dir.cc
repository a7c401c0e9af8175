#include "runner/sweep/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/errors.h"

namespace ringbench {

namespace fs = std::filesystem;

std::string create_run_dir(const std::string& base, bool unique) {
  std::error_code ec;
  const fs::path parent = fs::path(base).parent_path();
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) throw Error("cannot create " + parent.string() + ": " + ec.message());
  }
  for (int n = 1; n <= 1000; ++n) {
    const std::string dir = n == 1 ? base : base + "-" + std::to_string(n);
    if (::mkdir(dir.c_str(), 0755) == 0) return dir;
    if (errno != EEXIST) throw Error("cannot create the results directory " + dir + ": " + std::strerror(errno));
    if (unique) continue;
    if (!fs::is_directory(dir)) throw Error(dir + " exists and is not a directory");
    if (!fs::is_empty(dir, ec))
      throw Error(dir + " already exists and is not empty: continue it with --resume " + dir + ", or choose another --out");
    return dir;
  }
  throw Error("cannot create a results directory named " + base + "-N: 1000 of them exist");
}

RunDirLock::RunDirLock(const std::string& dir) : path_(dir + "/.lock") {
  const std::string& path = path_;
  for (;;) {
    lock_once(dir);
    // The holder before us removes the file as it lets go: a lock on a file that is no longer
    // at `path` protects nothing, so try again on the new one.
    struct stat held {}, now {};
    if (::fstat(fd_, &held) == 0 && ::stat(path.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev)
      break;
    ::close(fd_);
    fd_ = -1;
  }
  const std::string me = std::to_string(::getpid());
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size()))
    throw Error("cannot record this process in " + path + ": " + std::strerror(errno));
}

void RunDirLock::lock_once(const std::string& dir) {
  const std::string& path = path_;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) throw Error("cannot lock " + dir + " (" + path + "): " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[32] = {};
    const ssize_t k = ::pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw Error(dir + " is in use by pid " + (k > 0 ? std::string(pid, size_t(k)) : std::string("?")) +
                  " (another sweep or resume); wait for it, or use another directory");
    throw Error("cannot lock " + dir + ": " + std::strerror(err));
  }
}

RunDirLock::~RunDirLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still holding it: no results directory keeps a stale .lock
  ::close(fd_);             // releases the lock
}

}  // namespace ringbench
