#include "collectives/tag.h"

namespace ringbench {

uint64_t collective_tag(std::initializer_list<uint64_t> values) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint64_t v : values)
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ULL;
    }
  return h;
}

std::chrono::milliseconds transfer_timeout(std::chrono::milliseconds timeout, size_t bytes) {
  return timeout + std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(bytes) / kSlowestLinkBytesPerS * 1e3));
}

std::string describe_allreduce(const char* algo, size_t count, DType dtype, ReduceOp op) {
  return std::string("allreduce (") + algo + ") of " + std::to_string(count) + " x " +
         dtype_name(dtype) + " (" + op_name(op) + ")";
}

void rethrow_with_context(Transport& t, const Error& e, const std::string& what_op) {
  t.abort(e.what());
  std::string what = what_op + " failed: " + e.what();
  if (auto* te = dynamic_cast<const TimeoutError*>(&e)) throw TimeoutError(te->peer(), what);
  if (auto* io = dynamic_cast<const IoError*>(&e)) throw IoError(io->peer(), what);
  throw Error(what);
}

}  // namespace ringbench
