// Element types of checkpoint tensors and their exact conversions to float32.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace lockstep {

enum class DType : uint8_t { F32, F16, BF16, F64, I32, I64, U8, I8, U32, BOOL };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // safetensors spelling: "F32", "BF16", ...
// Parses the safetensors spelling; returns false for names lockstep does not know.
bool parse_dtype(std::string_view name, DType* out);

// bf16 -> f32 is exact (the bf16 bits are the top half of the f32).
inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// f32 -> bf16, round to nearest even (what PyTorch's .to(torch.bfloat16) does); NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// IEEE half -> f32, exact (subnormals, inf and NaN included).
float f16_to_f32(uint16_t h);
// f32 -> IEEE half, round to nearest even.
uint16_t f32_to_f16(float f);

}  // namespace lockstep
