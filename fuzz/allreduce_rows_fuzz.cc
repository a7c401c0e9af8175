// libFuzzer: one rank's allreduce measurement as rank 0 reads it back from the store
// (runner/cli/allreduce_rows.cc's unpack). The first two bytes choose the timing count and the
// row's element count; the rest is the packed record. Any input is a measurement or an Error
// naming the key and sender; one read back has exactly the timings asked for, every value a
// duration, no more wrong elements than the row has, and packs back to the same bytes.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/errors.h"
#include "runner/cli/allreduce_rows.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringbench;
  if (size < 2) return 0;
  const int iters = data[0] % 64;
  const size_t count = data[1];
  const std::string packed(reinterpret_cast<const char*>(data) + 2, size - 2);
  try {
    const Measured m = unpack(packed, "fuzz/key", 1, iters, count);
    if (m.us.size() != size_t(iters) || m.wrong > count || !std::isfinite(m.cpu_us)) std::abort();
    for (double us : m.us)
      if (!std::isfinite(us) || us < 0) std::abort();
    if (pack(m) != packed) std::abort();
    const Row r = summarize(std::vector<Measured>{m, m}, 1024, 1.0);
    if (r.wrong != 2 * m.wrong) std::abort();  // the ranks' wrong elements add up
  } catch (const Error&) {
  }
  return 0;
}
