#include "base/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/errors.h"
#include "base/input_file.h"

namespace ringbench {
namespace {

namespace fs = std::filesystem;

std::string os_error(int err) { return std::strerror(err); }

// The file a result for `path` goes to: `path` itself, or the regular file a symlink points to.
// Throws when that is something else. `exists` says whether there is one already.
std::string resolve_target(const std::string& path, const std::string& what, bool* exists) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) throw Error(what + " " + path + ": " + os_error(errno));
    *exists = false;
    return path;
  }
  std::string target = path;
  if (S_ISLNK(st.st_mode)) {
    if (::stat(path.c_str(), &st) != 0)
      throw Error(what + " " + path + " is a symlink to nothing (" + os_error(errno) +
                  "): ringbench writes through a symlink only to an existing regular file");
    std::error_code ec;
    target = fs::canonical(path, ec).string();
    if (ec) throw Error(what + " " + path + ": " + ec.message());
  }
  if (!S_ISREG(st.st_mode))
    throw Error(what + " " + path + " is " + file_type_name(st.st_mode) +
                ": ringbench writes results only to regular files");
  *exists = true;
  return target;
}

std::string dir_of(const std::string& path) {
  const std::string d = fs::path(path).parent_path().string();
  return d.empty() ? "." : d;
}

}  // namespace

void check_output_path(const std::string& path, const std::string& what) {
  if (path.empty()) return;
  bool exists = false;
  const std::string target = resolve_target(path, what, &exists);
  const std::string dir = dir_of(target);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw Error(what + " " + path + ": directory " + dir + ": " + os_error(errno));
  if (!S_ISDIR(st.st_mode)) throw Error(what + " " + path + ": " + dir + " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(what + " " + path + ": cannot write in " + dir + ": " + os_error(errno));
}

void write_file_atomic(const std::string& path, const std::string& text) {
  bool exists = false;
  const std::string target = resolve_target(path, "cannot write", &exists);
  std::string tmpl = target + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) throw Error("cannot write " + path + ": creating a temporary file in " + dir_of(target) + ": " + os_error(errno));
  const std::string tmp(name.data());
  auto fail = [&](const std::string& step, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error("cannot write " + path + ": " + step + ": " + os_error(err));
  };
  // mkstemp makes 0600; results are as readable as any file this process creates.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd, 0666 & ~mask) != 0) fail("fchmod", errno);
  for (size_t done = 0; done < text.size();) {
    const ssize_t k = ::write(fd, text.data() + done, text.size() - done);
    if (k < 0) {
      if (errno == EINTR) continue;
      fail("writing " + tmp, errno);
    }
    done += static_cast<size_t>(k);
  }
  if (::fsync(fd) != 0) fail("fsync " + tmp, errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot write " + path + ": closing " + tmp + ": " + os_error(err));
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot write " + path + ": renaming " + tmp + ": " + os_error(err));
  }
}

}  // namespace ringbench
