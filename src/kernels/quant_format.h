// Quantized weight formats: the element a kernel must reconstruct, and the quantizer that makes
// them.
//
// Affine (MLX's group-wise affine layout, so MLX checkpoints load as published): each row of K
// elements is cut into groups of `group_size` (a multiple of 16 that divides K); a group has one
// scale s and one bias b (stored as BF16, F16 or F32), and each element an unsigned code q of
// `bits` bits (4 or 8), packed little-end first into uint32 words: element k of a row is bits
// [(k % per_word) * bits, +bits) of word k / per_word, per_word = 32 / bits.
//
// The dequantized element is DEFINED as the float32 value fma(float(q), s, b): one rounding,
// the same on every target (scalar std::fma and Highway MulAdd on fused targets). Kernels feed
// exactly these values to the dot schedule of schedule.h, so a quantized linear equals the float
// linear of the dequantized matrix, bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/schedule.h"

namespace lockstep::kernels {

// Value i of an array of `dtype` (F32, BF16 or F16) as float32 (exact).
inline float scalar_at(DType dtype, const void* p, int64_t i) {
  switch (dtype) {
    case DType::BF16:
      return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::F16:
      return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

// The code of element (n, k) of an Affine matrix.
inline uint32_t quant_code(const Weight& w, int64_t n, int64_t k) {
  const int per_word = 32 / w.bits;
  const auto* words = static_cast<const uint32_t*>(w.data) + n * (w.cols / per_word);
  return (words[k / per_word] >> ((k % per_word) * w.bits)) & ((1u << w.bits) - 1u);
}

// The dequantized element (n, k): fma(q, scale, bias) of its group.
inline float quant_element(const Weight& w, int64_t n, int64_t k) {
  const int64_t g = n * (w.cols / w.group_size) + k / w.group_size;
  return std::fma(static_cast<float>(quant_code(w, n, k)), scalar_at(w.scale_dtype, w.scales, g),
                  scalar_at(w.scale_dtype, w.biases, g));
}

// The dtype quantize writes scales and biases in for a source dtype: F16 for F16 (its extra
// mantissa bits), else BF16 (what MLX writes for bfloat16 models; float32 range).
inline DType default_scale_dtype(DType source) {
  return source == DType::F16 ? DType::F16 : DType::BF16;
}

// Checks bits, group size and shape; fails naming `what` otherwise.
void check_quant_layout(const Weight& w, const char* what);

// An Affine matrix that owns its storage; view() is the Weight the kernels take.
struct QuantizedMatrix {
  int64_t rows = 0, cols = 0;
  int bits = 0;
  int64_t group_size = 0;
  DType scale_dtype = DType::BF16;
  std::vector<uint32_t> words;         // [rows][cols * bits / 32]
  std::vector<uint8_t> scales, biases;  // [rows][cols / group_size] of scale_dtype

  Weight view() const;
};

// Quantizes a float matrix (F32, BF16 or F16, not itself quantized), rows split over `pool`.
// Per group: bias = the group's minimum rounded down to scale_dtype, scale = (max - bias) /
// (2^bits - 1) rounded up to scale_dtype (so no element is clipped), q = round((w - bias) /
// scale) clamped to the code range; every element's error is then at most scale / 2 (plus one
// float32 rounding of the dequantization). Deterministic: scalar code, same on every machine.
QuantizedMatrix quantize_affine(const Weight& w, int bits, int64_t group_size, DType scale_dtype,
                                ThreadPool& pool);

}  // namespace lockstep::kernels
