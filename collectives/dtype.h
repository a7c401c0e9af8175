// Element types and reduction operations of the collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ringbench {

enum class DType : uint8_t { f32 = 0, f16 = 1, bf16 = 2 };
enum class ReduceOp : uint8_t { sum = 0, avg = 1 };

size_t dtype_size(DType t);
// nccl-tests names: "float", "half", "bfloat16".
const char* dtype_name(DType t);
// Deep-learning names, as --precision and --compression spell them: "fp32", "fp16", "bf16".
const char* dtype_short_name(DType t);
const char* op_name(ReduceOp op);
// Accepts the nccl-tests names and the short ones (float32/f32/fp32, float16/f16/fp16, bf16).
// Throws Error naming the allowed values.
DType parse_dtype(std::string_view s);
ReduceOp parse_op(std::string_view s);

}  // namespace ringbench
