// Microbenchmarks of the reduction kernels. The label names the instruction set in use; pick
// one with RINGBENCH_REDUCE_ISA=avx512|avx2|scalar. Bytes processed count 2 reads + 1 write.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "collectives/dtype.h"
#include "collectives/reduce.h"

namespace ringbench {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, FreeDeleter>;

// `bytes` of 64-byte-aligned memory holding small normal values (no subnormals, no NaN).
Buffer make_buffer(DType t, size_t bytes, float scale) {
  Buffer buf(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  if (!buf) throw std::bad_alloc();
  auto* p = static_cast<uint8_t*>(buf.get());
  const size_t count = bytes / dtype_size(t);
  for (size_t i = 0; i < count; ++i) {
    const float v = scale * (1.0f + static_cast<float>(i % 97) / 64.0f);
    if (t == DType::f32) {
      std::memcpy(p + 4 * i, &v, 4);
    } else {
      const uint16_t h = t == DType::f16 ? float_to_half(v) : float_to_bf16(v);
      std::memcpy(p + 2 * i, &h, 2);
    }
  }
  return buf;
}

// state.range(0) is the output size in bytes.
void run(benchmark::State& state, DType t, bool with_div) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const size_t count = bytes / dtype_size(t);
  const Buffer a = make_buffer(t, bytes, 1.0f);
  const Buffer b = make_buffer(t, bytes, 0.5f);
  const Buffer dst = make_buffer(t, bytes, 0.0f);
  for (auto _ : state) {
    if (with_div) {
      reduce_sum_div(t, dst.get(), a.get(), b.get(), count, 3.0f);
    } else {
      reduce_sum(t, dst.get(), a.get(), b.get(), count);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * state.range(0));
  state.SetLabel(reduce_isa());
}

void BM_reduce_sum(benchmark::State& state, DType t) { run(state, t, false); }
void BM_reduce_sum_div(benchmark::State& state, DType t) { run(state, t, true); }

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t kib : {4, 256, 4 << 10, 64 << 10}) b->Arg(kib << 10);
}

BENCHMARK_CAPTURE(BM_reduce_sum, float, DType::f32)->Apply(sizes);
BENCHMARK_CAPTURE(BM_reduce_sum, half, DType::f16)->Apply(sizes);
BENCHMARK_CAPTURE(BM_reduce_sum, bfloat16, DType::bf16)->Apply(sizes);
BENCHMARK_CAPTURE(BM_reduce_sum_div, float, DType::f32)->Apply(sizes);

}  // namespace
}  // namespace ringbench

BENCHMARK_MAIN();
