// libFuzzer: the allreduce cost table `allreduce --algo auto --algo-table FILE` reads
// (runner/record/algo_table.cc). Any input is a table or an Error naming the field; a table
// read back is one whose ranges tile every size and name only fitted algorithms, and what
// algo_table_json writes of it reads back the same.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/errors.h"
#include "runner/record/algo_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringbench;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const AlgoTable t = parse_algo_table(text, "fuzz.json");
    for (const auto& e : t.entries) {
      size_t from = 0;
      for (size_t i = 0; i < e.ranges.size(); ++i) {
        const auto& r = e.ranges[i];
        if (r.from_bytes != from || (i + 1 == e.ranges.size()) != !r.to_bytes) std::abort();  // the ranges tile [0, inf)
        if (r.to_bytes) from = *r.to_bytes + 1;
      }
      ranges_text(e);
    }
    if (algo_table_json(parse_algo_table(algo_table_json(t), "again.json")) != algo_table_json(t)) std::abort();
  } catch (const Error&) {
  }
  return 0;
}
