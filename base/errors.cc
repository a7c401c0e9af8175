#include "base/errors.h"

#include <cerrno>
#include <cstring>

namespace ringbench {

void check_errno(bool ok, const std::string& msg) {
  if (!ok) throw Error(msg + ": " + std::strerror(errno));
}

}  // namespace ringbench
