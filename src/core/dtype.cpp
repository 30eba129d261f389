#include "core/dtype.h"

#include <cmath>

namespace lockstep {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr DTypeInfo kInfo[] = {
    {DType::F32, "F32", 4},  {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2},
    {DType::F64, "F64", 8},  {DType::I32, "I32", 4}, {DType::I64, "I64", 8},
    {DType::U8, "U8", 1},    {DType::I8, "I8", 1},   {DType::U32, "U32", 4},
    {DType::BOOL, "BOOL", 1},
};
}  // namespace

size_t dtype_size(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i.size;
  return 0;
}

std::string_view dtype_name(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i.name;
  return "?";
}

bool parse_dtype(std::string_view name, DType* out) {
  for (const auto& i : kInfo) {
    if (i.name == name) {
      *out = i.type;
      return true;
    }
  }
  return false;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  if (std::isnan(f)) return sign | 0x7e00u;
  const float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7c00u;  // rounds to inf
  if (a < 6.103515625e-05f) {                // subnormal half: scale to an integer count of 2^-24
    const float scaled = a * 16777216.0f;    // exact (power of two)
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  uint32_t m = bits & 0x7fffffu;
  int32_t e = static_cast<int32_t>((bits >> 23) & 0xffu) - 127 + 15;
  uint32_t half = static_cast<uint32_t>(e) << 10 | (m >> 13);
  const uint32_t rest = m & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into exponent: fine
  return sign | static_cast<uint16_t>(half);
}

}  // namespace lockstep
