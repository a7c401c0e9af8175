// Element-wise reduction kernels of the ring, vectorized for the host CPU (AVX-512 / AVX2+F16C
// chosen at run time, scalar fallback). float16 and bfloat16 are added in float32 and rounded
// to nearest-even once per element, so the result equals the scalar reference bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/dtype.h"

namespace ringbench {

// dst[i] = a[i] + b[i]; dst may alias a or b.
void reduce_sum(DType t, void* dst, const void* a, const void* b, size_t count);
// dst[i] = (a[i] + b[i]) / divisor — the average fused into the ring's last reduce step.
void reduce_sum_div(DType t, void* dst, const void* a, const void* b, size_t count,
                    float divisor);
// dst[i] = src[i] / divisor (average with a single rank, or after MPI_SUM).
void divide(DType t, void* dst, const void* src, size_t count, float divisor);

// dst[i] = src[i] as `t` (f16 or bf16; f32: a copy), rounded to nearest even as the kernels
// round; and back to float. Vectorized as the kernels are (AVX-512; scalar otherwise).
void narrow_floats(DType t, void* dst, const float* src, size_t count);
void widen_to_floats(DType t, float* dst, const void* src, size_t count);

// Scalar conversions, exact round-to-nearest-even; used by tests and by the scalar kernels.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

// Which instruction set the kernels use on this CPU: "avx512", "avx2" or "scalar".
// The environment variable RINGBENCH_REDUCE_ISA=avx512|avx2|scalar|auto overrides the choice
// (an unknown or unsupported value makes the first kernel call throw Error).
const char* reduce_isa();

// --- For tests and benchmarks only -------------------------------------------------------
// Makes the kernels use instruction set `name` ("avx512", "avx2" or "scalar") from now on;
// "auto" goes back to the default choice (RINGBENCH_REDUCE_ISA, else the best the CPU has).
// Returns false, changing nothing, if the name is unknown or the CPU or build lacks it.
// Affects every thread; calls already running finish with the previous choice.
bool set_reduce_isa(const char* name);

}  // namespace ringbench
