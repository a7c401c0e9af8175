// libFuzzer: the what-if files of `ringbench predict --what-if` (runner/predict/whatif.cc and
// remote_whatif.cc). Any input is a described cluster, a remote what-if or an Error naming what is
// wrong; a remote one's answers are finite for every grid cell.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/errors.h"
#include "runner/predict/remote_whatif.h"
#include "runner/predict/whatif.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringbench::predict;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    if (!is_remote_what_if(text)) {
      parse_what_if(text, "fuzz.yaml");
      return 0;
    }
    const RemoteWhatIf w = parse_remote_what_if(text, "fuzz.yaml");
    const RemoteTraffic t{17e6, 17e6, 5};
    for (const auto& s : w.servers)
      for (const auto& m : s.models)
        for (const auto& tr : w.transports)
          for (double g : w.grid_link_gbps)
            for (double l : w.grid_latency_us) {
              const double k = remote_kept({m.step_s.value, m.step_s.value * m.backward_share.value}, t,
                                           {g * tr.efficiency.value, l + tr.latency_us.value});
              if (!(k > 0 && k <= 1)) std::abort();  // a share of local throughput, whatever the file says
            }
  } catch (const ringbench::Error&) {
  }
  return 0;
}
