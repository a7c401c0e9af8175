// libFuzzer: what `infer --checkpoint` reads (models/checkpoint.cc), for a tiny graph (35 values,
// so a valid file is small enough to mutate): from bytes in memory and, the same bytes, streamed
// from a file (a memfd). Any bytes give the graph's values or an Error, and both readers agree.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/errors.h"
#include "models/checkpoint.h"
#include "models/graph.h"

namespace {

using namespace ringbench;

// Its checkpoints are fuzz/corpus/checkpoint_fuzz/valid and the seeds made from it.
models::Graph tiny_graph() {
  models::Graph g;
  g.model = "tiny";
  const int x = g.input({2, 2, 2});
  const int bn = g.batch_norm(x, "bn");
  g.add_output(g.fc(bn, "fc", {3, true}));
  return g;
}

// "" when `read` returns a checkpoint of `g`'s sizes; else the Error's message.
template <typename Read>
std::string outcome(const models::Graph& g, Read read) {
  try {
    const models::Checkpoint c = read();
    if (c.params.size() != g.param_count || c.state.size() != g.state_count || c.file_sha256.size() != 64) std::abort();
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const models::Graph g = tiny_graph();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const std::string from_memory = outcome(g, [&] { return models::decode_checkpoint(bytes, "F", g); });
  const int fd = ::memfd_create("checkpoint", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (::write(fd, data, size) == ssize_t(size)) {
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    const std::string from_file = outcome(g, [&] { return models::load_checkpoint(path, g); });
    // The same verdict: only the path named differs.
    if (from_file.empty() != from_memory.empty()) std::abort();
  }
  ::close(fd);
  return 0;
}
