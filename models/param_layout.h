// Where a backend keeps parameter tensors in another order than the graph's plain one, inside
// the flat buffers bind() takes. The oneDNN bf16 backend keeps conv weights in the blocked
// layout its weight-gradient primitive writes (OIhw16i16o), so a step converts the fp32 master
// weights straight into the bf16 layouts its convolutions read and reorders no gradient. Each
// such tensor keeps its offset and element count (only tensors that need no padding are
// blocked), and parameters, gradients and momentum share the layout: SGD, the allreduce's sum
// and loss scaling are element-wise and see no difference. Whatever crosses a boundary
// (Trainer::host_params, checkpoints, hashes, migration) is converted to plain there.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringbench::models {

// A conv weight [out, in, kh, kw] stored as OIhw16i16o: [out/16][in/16][kh][kw][16 in][16 out].
struct BlockedWeight {
  size_t offset = 0;  // into the flat buffer, as Graph::params[].offset
  int out = 0, in = 0, kh = 0, kw = 0;
};

struct ParamLayout {
  std::vector<BlockedWeight> blocked;  // every tensor not listed is plain
  bool plain() const { return blocked.empty(); }
  std::string describe() const;  // e.g. "93 conv weight tensors in OIhw16i16o, the rest plain"
};

// Whether [out, in, kh, kw] can be blocked without padding (both channel counts multiples of 16).
bool blockable(int out, int in);

// The flat buffer `flat` (the graph's param_count floats), in place: from plain into `layout`,
// and back. Exact (a permutation).
void to_param_layout(const ParamLayout& layout, float* flat);
void to_plain_params(const ParamLayout& layout, float* flat);

}  // namespace ringbench::models
