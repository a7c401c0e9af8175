#include "base/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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
  AtomicFileWriter out(path);
  out.write(text);
  out.commit();
}

AtomicFileWriter::AtomicFileWriter(const std::string& path) : path_(path) {
  bool exists = false;
  target_ = resolve_target(path, "cannot write", &exists);
  std::string tmpl = target_ + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0)
    throw Error("cannot write " + path + ": creating a temporary file in " + dir_of(target_) + ": " + os_error(errno));
  tmp_ = name.data();
  // mkstemp makes 0600; results are as readable as any file this process creates.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  if (::fchmod(fd_, 0666 & ~mask) != 0) fail("fchmod", errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFileWriter::fail(const std::string& step, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  tmp_.clear();
  throw Error("cannot write " + path_ + ": " + step + ": " + os_error(err));
}

void AtomicFileWriter::write_at(uint64_t offset, std::string_view bytes) {
  if (fd_ < 0) throw Error("cannot write " + path_ + ": the file was already committed or failed");
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t k = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, off_t(offset + done));
    if (k < 0) {
      if (errno == EINTR) continue;
      fail("writing " + tmp_, errno);
    }
    done += static_cast<size_t>(k);
  }
  size_ = std::max<uint64_t>(size_, offset + bytes.size());
}

void AtomicFileWriter::write(std::string_view bytes) { write_at(size_, bytes); }

void AtomicFileWriter::read_back(const std::function<void(std::string_view)>& chunk) {
  std::vector<char> buf(size_t(1) << 20);
  for (uint64_t at = 0; at < size_;) {
    const ssize_t k = ::pread(fd_, buf.data(), std::min<uint64_t>(buf.size(), size_ - at), off_t(at));
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) fail("reading back " + tmp_, errno);
    if (k == 0) fail("reading back " + tmp_ + " (it ended early)", EIO);
    chunk(std::string_view(buf.data(), size_t(k)));
    at += uint64_t(k);
  }
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw Error("cannot write " + path_ + ": the file was already committed or failed");
  if (::fsync(fd_) != 0) fail("fsync " + tmp_, errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("closing " + tmp_, errno);
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) fail("renaming " + tmp_, errno);
  tmp_.clear();
}

}  // namespace ringbench
