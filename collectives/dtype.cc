#include "collectives/dtype.h"

#include "base/errors.h"

namespace ringbench {

size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f16: return "half";
    case DType::bf16: return "bfloat16";
  }
  return "?";
}

const char* dtype_short_name(DType t) {
  switch (t) {
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

const char* op_name(ReduceOp op) { return op == ReduceOp::sum ? "sum" : "avg"; }

DType parse_dtype(std::string_view s) {
  if (s == "float" || s == "float32" || s == "f32" || s == "fp32") return DType::f32;
  if (s == "half" || s == "float16" || s == "f16" || s == "fp16") return DType::f16;
  if (s == "bfloat16" || s == "bf16") return DType::bf16;
  throw Error("unknown dtype '" + std::string(s) + "': use float, half or bfloat16");
}

ReduceOp parse_op(std::string_view s) {
  if (s == "sum") return ReduceOp::sum;
  if (s == "avg" || s == "mean") return ReduceOp::avg;
  throw Error("unknown reduction op '" + std::string(s) + "': use sum or avg");
}

}  // namespace ringbench
