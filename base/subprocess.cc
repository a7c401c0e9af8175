#include "base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "base/errors.h"

extern char** environ;

namespace ringbench {
namespace {

// Reads both pipes to their end (poll, so a full stderr pipe cannot block a child writing stdout).
void drain(int out_fd, int err_fd, std::string* out, std::string* err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* bufs[2] = {out, err};
  for (int open = 2; open > 0;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      char buf[65536];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        bufs[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open;
      }
    }
  }
}

bool executable(const std::string& p) { return ::access(p.c_str(), X_OK) == 0; }

}  // namespace

std::string find_on_path(const std::string& exe, const std::vector<std::string>& first_dirs) {
  for (const auto& dir : first_dirs)
    if (executable(dir + "/" + exe)) return dir + "/" + exe;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && executable(dir + "/" + exe)) return dir + "/" + exe;
  return "";
}

bool on_path(const std::string& exe) { return !find_on_path(exe).empty(); }

std::string ProcessOutput::message() const {
  std::string m = err.empty() ? out : err;
  while (!m.empty() && std::isspace(static_cast<unsigned char>(m.back()))) m.pop_back();
  return m.empty() ? "exit status " + std::to_string(status) : m;
}

ProcessOutput run_process(const std::string& path, const std::vector<std::string>& argv, const std::string& cwd) {
  ProcessOutput o;
  int out[2], err[2];
  check_errno(::pipe2(out, O_CLOEXEC) == 0, "pipe2");
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]), ::close(out[1]);
    check_errno(false, "pipe2");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, path.c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]), ::close(err[1]);
  if (rc == 0) drain(out[0], err[0], &o.out, &o.err);
  ::close(out[0]), ::close(err[0]);
  if (rc != 0) {
    o.status = 127;
    o.err = "cannot run " + path + (cwd.empty() ? "" : " in " + cwd) + ": " + std::strerror(rc);
    return o;
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return o;
}

}  // namespace ringbench
