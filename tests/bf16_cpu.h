// Whether oneDNN runs bf16 natively on this CPU, for the tests that need it (they skip, saying
// why, elsewhere).
#pragma once

#include <gtest/gtest.h>

#include <oneapi/dnnl/dnnl.hpp>

inline bool cpu_has_bf16() {
  const auto need = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & need) == need;
}

#define SKIP_WITHOUT_BF16() \
  if (!cpu_has_bf16()) GTEST_SKIP() << "this CPU has no native bf16 instructions (AVX512-BF16 or AMX)"
