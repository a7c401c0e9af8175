#include "base/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/errors.h"

namespace ringbench {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

const char* file_type_name(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

std::string read_input_file(const std::string& path, const std::string& what, size_t max_bytes) {
  const std::string name = what + " " + path;
  struct stat before{};
  if (::stat(path.c_str(), &before) == 0 && !S_ISREG(before.st_mode))  // opening a device may act: not at all
    throw Error(name + " is " + file_type_name(before.st_mode) + ": only a regular file is read");
  // O_NONBLOCK: a FIFO put in its place since must not wait for a writer; it is refused below.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) throw Error("cannot read " + name + ": " + std::strerror(errno));
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) throw Error("cannot read " + name + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw Error(name + " is " + file_type_name(st.st_mode) + ": only a regular file is read");
  const auto too_big = [&] {
    return Error(name + " is larger than " + std::to_string(max_bytes >> 20) + " MiB: refused (is it the right file?)");
  };
  if (static_cast<unsigned long long>(st.st_size) > max_bytes) throw too_big();
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("cannot read " + name + ": " + std::strerror(errno));
    if (n == 0) break;
    if (text.size() + size_t(n) > max_bytes) throw too_big();  // it grew while being read
    text.append(buf, size_t(n));
  }
  return text;
}

std::string quote_excerpt(std::string_view value, size_t max_chars) {
  std::string out;
  for (char c : value.substr(0, max_chars)) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7f ? '?' : c;
  }
  if (value.size() > max_chars) out += "...";
  return "'" + out + "'";
}

}  // namespace ringbench
