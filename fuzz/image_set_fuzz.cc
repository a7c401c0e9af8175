// libFuzzer: what `train --data jpeg` reads from a data set (input/): the manifest, a shard's
// header and index, and a record's JPEG through the decoder and the crop. Any bytes give a
// result or an Error; an accepted index always lies inside its file.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/errors.h"
#include "input/augment.h"
#include "input/manifest.h"
#include "input/shard_format.h"

using namespace ringbench;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const input::Manifest m = input::parse_manifest(bytes, "M");
    if (m.classes == 0 || m.shards.empty()) std::abort();
  } catch (const Error&) {
  }
  try {
    const auto records = input::decode_shard_index(bytes, size, 1000, "S");
    for (const input::ShardRecord& r : records)
      if (r.offset + r.bytes > size || r.label >= 1000) std::abort();
  } catch (const Error&) {
  }
  try {
    static input::Augmenter aug;
    std::vector<float> out(3 * 16 * 16);
    input::Rng rng(1, size);
    aug.run(bytes, "J", rng, 16, out.data());
  } catch (const Error&) {
  }
  return 0;
}
